package bench

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit/ratelimittest"
)

// pairSlices is how many turns each side of a pair takes in one run of a
// BenchmarkConfigurationPairs cell: at -benchtime 150ms, about 19 ms a
// turn, short beside the episodes of load a shared machine goes through
// (seconds, slowing whatever runs then by up to 2x).
const pairSlices = 8

// peerShare is the part of our requests' count that go-limiter serves in
// its turn: about its time at 3-5x slower, so that both sides take the
// load of the machine for about as long.
const peerShare = 4

// BenchmarkConfigurationPairs measures every row of the configuration matrix
// and go-limiter on the same case in alternating turns, in the same
// process, and reports go-limiter's time a request (go-limiter-ns/op) and
// the row's multiple of its speed (x-go-limiter) beside the row's own
// figures (ns/op, allocs/op: the row's requests only), and the median of
// the moves of a cache line between two cores that a probe before each
// turn timed (xcore-ns; see CrossCoreNs), which says whether the cell ran
// while the machine's cores were far apart. The median, not the slowest:
// a probe that the operating system stops for a moment times microseconds,
// once, where an episode of far cores lasts through every turn.
//
// BenchmarkConfigurations measures go-limiter once, before every row; on a
// machine whose neighbours load it in episodes of seconds, the rows measured
// in one episode and the peer in another give a ratio that says nothing of
// either library. Here both sides run within the same second, turn about,
// each turn after the side's own requests were served once, untimed, so
// that its keys and requests are back in the cache the other side's turn
// took. Collections are not forced between turns: one forced before a
// turn gave the side that allocates less (ours) turns with no collection
// at all, 10-15% off its figures at 10,000 keys; left alone, each turn
// pays for the collections that fall in it, the other side's garbage
// included:
//
//	go test -run '^$' -bench ConfigurationPairs -cpu 1,2 ./bench
func BenchmarkConfigurationPairs(b *testing.B) {
	peer := goLimiterLibrary()
	for _, cell := range Cells() {
		b.Run(cell.Name(), func(b *testing.B) {
			p := prepareCell(b, cell)
			q, err := Prepare(peer, cell.Case)
			if err != nil {
				b.Fatal(err)
			}
			defer q.Close()
			peerNs, xcore := runPaired(b, p, q)
			b.ReportMetric(peerNs, "go-limiter-ns/op")
			b.ReportMetric(xcore, "xcore-ns")
			if ours := float64(b.Elapsed().Nanoseconds()) / float64(b.N); ours > 0 {
				b.ReportMetric(peerNs/ours, "x-go-limiter")
			}
		})
	}
}

// runPaired serves b.N of ours's requests, timed, in pairSlices turns, and
// before each of them a peerShare-th as many of peer's, untimed by b; it
// returns peer's time a request and the median of the cross-core hand-over
// times of a probe before each of ours's turns (untimed). Each turn runs on
// GOMAXPROCS goroutines, as b.RunParallel would; both sides use the same
// loop and are warmed alike before a turn (see warm). It fails b if a
// response was not what its side wants.
func runPaired(b *testing.B, ours, peer *Prepared) (peerNs, xcore float64) {
	procs := runtime.GOMAXPROCS(0)
	ws := make([]*ratelimittest.DiscardWriter, procs)
	for i := range ws {
		ws[i] = ratelimittest.NewDiscardWriter()
	}
	var peerTime time.Duration
	peerN := 0
	probes := make([]float64, 0, pairSlices)
	b.ReportAllocs()
	b.ResetTimer()
	b.StopTimer()
	for s := range pairSlices {
		n := b.N / pairSlices
		if s < b.N%pairSlices {
			n++
		}
		m := max(1, n/peerShare)
		if bad := warm(peer, ws, m); bad > 0 {
			b.Fatalf("go-limiter: %d responses were not %d", bad, peer.Want)
		}
		start := time.Now()
		if bad := serveTurn(peer, ws, m); bad > 0 {
			b.Fatalf("go-limiter: %d responses were not %d", bad, peer.Want)
		}
		peerTime += time.Since(start)
		peerN += m
		if n == 0 {
			continue
		}
		if bad := warm(ours, ws, n); bad > 0 {
			b.Fatalf("%d responses were not %d", bad, ours.Want)
		}
		probes = append(probes, CrossCoreNs(probeHandOvers))
		b.StartTimer()
		bad := serveTurn(ours, ws, n)
		b.StopTimer()
		if bad > 0 {
			b.Fatalf("%d responses were not %d", bad, ours.Want)
		}
	}
	return float64(peerTime.Nanoseconds()) / float64(peerN), Median(probes)
}

// probeHandOvers is the size of the probe before each turn: 0.1 to 0.8 ms.
const probeHandOvers = 2000

// warm readies p for a timed turn of n requests: as many of p's requests
// as the turn will reach, up to all of them, served once. It returns how
// many responses were not p.Want.
func warm(p *Prepared, ws []*ratelimittest.DiscardWriter, n int) int64 {
	return serveTurn(p, ws, min(n, len(p.Reqs)))
}

// serveTurn serves n of p's requests on len(ws) goroutines, each with its
// writer of ws, taking the requests round-robin from a start of its own as
// runParallel does, and returns how many responses were not p.Want.
func serveTurn(p *Prepared, ws []*ratelimittest.DiscardWriter, n int) int64 {
	var wg sync.WaitGroup
	var bad atomic.Int64
	reqs := p.Reqs
	for g, w := range ws {
		k := n / len(ws)
		if g < n%len(ws) {
			k++
		}
		wg.Go(func() {
			i := uint64(g+1) * 7919
			for range k {
				w.Reset()
				i++
				p.Handler.ServeHTTP(w, reqs[i%uint64(len(reqs))])
				if w.Status() != p.Want {
					bad.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return bad.Load()
}
