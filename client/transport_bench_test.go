package ratelimitclient_test

import (
	"net/http"
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

// BenchmarkRoundTrip compares the bare base with the Transport over it, for
// an unthrottled partition: without rate-limit fields and no local limit,
// then (fields/) with every response carrying RateLimit and
// RateLimit-Policy fields of ample quota, the same values on each response
// as a server sends them while the quota does not move.
func BenchmarkRoundTrip(b *testing.B) {
	for _, fields := range []bool{false, true} {
		base := newNoopBase()
		prefix := ""
		if fields {
			base.resp.Header["Ratelimit"] = []string{`"default";r=100000000;t=1`}
			base.resp.Header["Ratelimit-Policy"] = []string{`"default";q=100000000;w=1`}
			prefix = "fields/"
		}
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
