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
// an unthrottled partition (no rate-limit fields, no local limit).
func BenchmarkRoundTrip(b *testing.B) {
	base := newNoopBase()
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
	b.Run("base", func(b *testing.B) { run(b, base) })
	b.Run("transport", func(b *testing.B) { run(b, &ratelimitclient.Transport{Base: base}) })
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
	b.Run("base/parallel", func(b *testing.B) { parallel(b, base) })
	b.Run("transport/parallel", func(b *testing.B) { parallel(b, &ratelimitclient.Transport{Base: base}) })
}

// BenchmarkRoundTripWithFields is the Transport's cost when every response
// carries RateLimit fields with ample quota.
func BenchmarkRoundTripWithFields(b *testing.B) {
	base := newNoopBase()
	base.resp.Header["Ratelimit"] = []string{`"default";r=100000000;t=1`}
	base.resp.Header["Ratelimit-Policy"] = []string{`"default";q=100000000;w=1`}
	tr := &ratelimitclient.Transport{Base: base}
	req, _ := http.NewRequest(http.MethodGet, "https://api.test/v1/things", nil)
	b.ReportAllocs()
	start := cpuTime()
	for b.Loop() {
		if _, err := tr.RoundTrip(req); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, start)
}
