package ratelimit

import "testing"

// TestCarveOutFilterNeverHidesACarveOut: the cheap test before the lookup
// turns away only paths that are not carve-outs: every carve-out, and
// every path sharing its length or second byte, is decided by the set.
func TestCarveOutFilterNeverHidesACarveOut(t *testing.T) {
	paths := []string{"/healthz", "/livez", "/readyz", "/metrics", "/a", "/~x", "/Z9"}
	c := newCarveOuts(paths)
	in := map[string]bool{}
	for _, p := range paths {
		in[p] = true
	}
	probes := []string{"", "/", "//", "/h", "/healthz/", "/healthy", "/api/items", "/b", "/~", "/Z", "healthz", "/metricz"}
	for _, p := range append(probes, paths...) {
		if got := c.has(p); got != in[p] {
			t.Errorf("has(%q) = %v, want %v", p, got, in[p])
		}
	}
	short := newCarveOuts([]string{"/"})
	if !short.has("/") || short.has("") {
		t.Error("a one-byte carve-out set directly (not through WithCarveOuts) is not found")
	}
}
