package bench

import (
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/ratelimit/ratelimittest"
)

// TestConfigurationMatrix checks every row of the matrix before a number is
// trusted: 10,000 distinct keys, the allow path allowed, the deny path denied
// on the second request of each key, fields where the row sends them.
func TestConfigurationMatrix(t *testing.T) {
	for _, cell := range Cells() {
		t.Run(cell.Name(), func(t *testing.T) { prepareCell(t, cell) })
	}
}

// BenchmarkConfigurations measures the full middleware round trip of every
// configuration a user writes (see Configurations), beside go-limiter, the
// fastest peer, on the cases of BenchmarkMiddleware. Compare a row with
// go-limiter's from the same run:
//
//	go test -run '^$' -bench Configurations -cpu 1,2 ./bench
func BenchmarkConfigurations(b *testing.B) {
	peer := goLimiterLibrary()
	for _, c := range Cases {
		b.Run("go-limiter/"+c.String(), func(b *testing.B) {
			p, err := Prepare(peer, c)
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			runParallel(b, p.Handler, p.Reqs, p.Want)
		})
	}
	for _, cell := range Cells() {
		b.Run(cell.Name(), func(b *testing.B) {
			p := prepareCell(b, cell)
			runParallel(b, p.Handler, p.Reqs, p.Want)
		})
	}
}

// runParallel serves reqs round-robin from every goroutine of b.RunParallel
// and fails b if a response was not want.
func runParallel(b *testing.B, h http.Handler, reqs []*http.Request, want int) {
	n := uint64(len(reqs))
	var seq atomic.Uint64
	var bad atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		w := ratelimittest.NewDiscardWriter()
		i := seq.Add(7919)
		for pb.Next() {
			w.Reset()
			i++
			h.ServeHTTP(w, reqs[i%n])
			if w.Status() != want {
				bad.Add(1)
			}
		}
	})
	b.StopTimer()
	if k := bad.Load(); k > 0 {
		b.Fatalf("%d responses were not %d", k, want)
	}
}

// prepareCell is PrepareConfiguration of cell, closed when tb ends; it
// fails tb if the cell's middleware does not behave as the cell claims.
func prepareCell(tb testing.TB, cell Cell) *Prepared {
	p, err := PrepareConfiguration(cell.Config, cell.Case)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(p.Close)
	return p
}
