package labelcap

import (
	"fmt"
	"sync"
	"testing"
)

func TestCap(t *testing.T) {
	made := 0
	c := New(3, "other", func(rule, kind string) string { made++; return rule + "/" + kind })
	for _, tc := range []struct{ rule, kind, want string }{
		{"a", "ip", "a/ip"}, {"a", "ip", "a/ip"}, {"a", "user", "a/user"}, {"b", "ip", "b/ip"},
		{"c", "ip", "other"}, {"a", "ip", "a/ip"}, {"d", "x", "other"},
	} {
		if got := c.Get(tc.rule, tc.kind); got != tc.want {
			t.Fatalf("Get(%q, %q) = %q, want %q", tc.rule, tc.kind, got, tc.want)
		}
	}
	if made != 3 {
		t.Fatalf("made %d values, want 3", made)
	}
}

func TestCapConcurrent(t *testing.T) {
	c := New(50, -1, func(rule, kind string) int { var n int; fmt.Sscan(rule, &n); return n })
	var wg sync.WaitGroup
	var mu sync.Mutex
	seen := map[int]bool{}
	for w := 0; w < 8; w++ {
		wg.Go(func() {
			for i := 0; i < 400; i++ {
				v := c.Get(fmt.Sprint(i), "k")
				mu.Lock()
				seen[v] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != 51 || !seen[-1] {
		t.Fatalf("%d distinct values (want 50 pairs and other)", len(seen))
	}
}
