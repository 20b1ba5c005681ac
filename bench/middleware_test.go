package bench

import "testing"

// TestConfigurations checks every library's configuration before any number
// is trusted: keyed by RemoteAddr's IP (not a header, not one global key),
// 10,000 really distinct keys, 200 with headers on the allow path and 429
// with headers on the deny path.
func TestConfigurations(t *testing.T) {
	for _, lib := range Libraries() {
		t.Run(lib.Name, func(t *testing.T) {
			if err := CheckKeying(lib); err != nil {
				t.Fatal(err)
			}
			for _, c := range Cases {
				p, err := Prepare(lib, c)
				if err != nil {
					t.Fatal(err)
				}
				p.Close()
			}
		})
	}
}

// BenchmarkMiddleware measures the full middleware round trip (key, limiter,
// headers, and the 429 response on the deny path) of every library, in
// parallel, for one hot key and for 10,000 distinct client IPs.
func BenchmarkMiddleware(b *testing.B) {
	for _, lib := range Libraries() {
		for _, c := range Cases {
			b.Run(lib.Name+"/"+c.String(), func(b *testing.B) {
				p, err := Prepare(lib, c)
				if err != nil {
					b.Fatal(err)
				}
				defer p.Close()
				runParallel(b, p.Handler, p.Reqs, p.Want)
			})
		}
	}
}
