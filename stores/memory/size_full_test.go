//go:build !race

package memory_test

import (
	"testing"

	"github.com/sluicehq/ratelimit/stores"
)

// TestMemoryAtFullBound fills each table to the default bound of 1,048,576
// keys (and past it, so that it evicts) and holds the figures the package
// documents: at most 24 bytes per GCRA key and 36 per window key, about
// 24 MiB and 33 MiB. (Not under the race detector, which makes it slow.)
func TestMemoryAtFullBound(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates 2 million keys")
	}
	for _, c := range []struct {
		alg    stores.Algorithm
		budget float64
	}{{stores.GCRA, 24}, {stores.FixedWindow, 36}} {
		perKey, n := heapPerKey(1<<20+1<<16, c.alg)
		t.Logf("%v: %.1f bytes per key with %d keys tracked (%.1f MiB)", c.alg, perKey, n, perKey*float64(n)/(1<<20))
		if n < 1<<20*99/100 {
			t.Errorf("%v: only %d keys tracked at the bound of %d", c.alg, n, 1<<20)
		}
		if perKey > c.budget {
			t.Errorf("%v: %.1f bytes per key at the full bound, want at most %.0f", c.alg, perKey, c.budget)
		}
	}
}
