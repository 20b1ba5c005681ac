package ratelimitclient_test

import (
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"

	ratelimitclient "github.com/sluicehq/ratelimit/client"
)

// noopBase answers every request with the same response, without I/O: the
// benchmarks measure what the Transport adds to its base.
type noopBase struct{ resp *http.Response }

func (b noopBase) RoundTrip(*http.Request) (*http.Response, error) { return b.resp, nil }

func newNoopBase() noopBase {
	return noopBase{resp: &http.Response{StatusCode: http.StatusOK, Header: http.Header{
		"Content-Type": {"application/json"},
		"Date":         {"Mon, 23 Nov 2026 04:00:00 GMT"},
	}, Body: http.NoBody}}
}

// cycleBase answers each request with the next of its responses, round
// and round.
type cycleBase struct {
	resps []*http.Response
	n     atomic.Uint64
}

func (b *cycleBase) RoundTrip(*http.Request) (*http.Response, error) {
	return b.resps[b.n.Add(1)%uint64(len(b.resps))], nil
}

// newCountingBase answers with RateLimit fields whose quota left goes down
// by one on each response, as a server reports it while the quota moves.
func newCountingBase() *cycleBase {
	b := &cycleBase{}
	for i := range 4096 {
		resp := newNoopBase().resp
		resp.Header["Ratelimit"] = []string{`"default";r=` + strconv.Itoa(100000000-i) + `;t=1`}
		resp.Header["Ratelimit-Policy"] = []string{`"default";q=100000000;w=1`}
		b.resps = append(b.resps, resp)
	}
	return b
}

// BenchmarkRoundTrip compares the bare base with the Transport over it, for
// an unthrottled partition: without rate-limit fields and no local limit,
// then (fields/) with every response carrying RateLimit and
// RateLimit-Policy fields of ample quota, the same values on each response
// as a server sends them while the quota does not move, and (counting/)
// with the quota left one less on each response.
func BenchmarkRoundTrip(b *testing.B) {
	for _, fields := range []string{"", "fields/", "counting/"} {
		var base http.RoundTripper
		switch fields {
		case "":
			base = newNoopBase()
		case "fields/":
			nb := newNoopBase()
			nb.resp.Header["Ratelimit"] = []string{`"default";r=100000000;t=1`}
			nb.resp.Header["Ratelimit-Policy"] = []string{`"default";q=100000000;w=1`}
			base = nb
		case "counting/":
			base = newCountingBase()
		}
		prefix := fields
		run := func(b *testing.B, rt http.RoundTripper) {
			req, _ := http.NewRequest(http.MethodGet, "https://api.test/v1/things", nil)
			req.Header.Set("Authorization", "Bearer 0123456789abcdef")
			b.ReportAllocs()
			start := cpuTime()
			for b.Loop() {
				if _, err := rt.RoundTrip(req); err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, start)
		}
		b.Run(prefix+"base", func(b *testing.B) { run(b, base) })
		b.Run(prefix+"transport", func(b *testing.B) { run(b, &ratelimitclient.Transport{Base: base}) })
		parallel := func(b *testing.B, rt http.RoundTripper) {
			b.ReportAllocs()
			start := cpuTime()
			defer reportCPU(b, start)
			b.RunParallel(func(pb *testing.PB) {
				req, _ := http.NewRequest(http.MethodGet, "https://api.test/v1/things", nil)
				for pb.Next() {
					if _, err := rt.RoundTrip(req); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		b.Run(prefix+"base/parallel", func(b *testing.B) { parallel(b, base) })
		b.Run(prefix+"transport/parallel", func(b *testing.B) { parallel(b, &ratelimitclient.Transport{Base: base}) })
	}
}

// TestRoundTripWithFieldsDoesNotAllocate: a round trip whose response
// carries RateLimit and RateLimit-Policy fields allocates nothing, whether
// they repeat the last response's or the quota left moves on each.
func TestRoundTripWithFieldsDoesNotAllocate(t *testing.T) {
	repeated := newNoopBase()
	repeated.resp.Header["Ratelimit"] = []string{`"default";r=100000000;t=1`}
	repeated.resp.Header["Ratelimit-Policy"] = []string{`"default";q=100000000;w=1`}
	for name, base := range map[string]http.RoundTripper{"repeated": repeated, "counting": newCountingBase()} {
		tr := &ratelimitclient.Transport{Base: base}
		req, _ := http.NewRequest(http.MethodGet, "https://api.test/v1/things", nil)
		req.Header.Set("Authorization", "Bearer 0123456789abcdef")
		if allocs := testing.AllocsPerRun(1000, func() {
			if _, err := tr.RoundTrip(req); err != nil {
				t.Fatal(err)
			}
		}); allocs != 0 {
			t.Errorf("%s fields: %v allocations per round trip, want 0", name, allocs)
		}
	}
}
