package config

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/sluicehq/ratelimit"
)

// TestTableFindsEveryKeyAndNothingElse checks the override table against a
// map, across growth from a table sized too small.
func TestTableFindsEveryKeyAndNothingElse(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tab := newTable(1)
	want := map[string]int{}
	for i := range 5000 {
		k := fmt.Sprintf("k%d", rng.IntN(8000))
		prev := tab.insert(k, override{limit: ratelimit.PerMinute(i + 1)})
		if _, dup := want[k]; dup != (prev != nil) {
			t.Fatalf("insert %q: previous %v, map says dup=%v", k, prev, dup)
		}
		if !dup(want, k) {
			want[k] = i + 1
		}
	}
	for i := range 10000 {
		k := fmt.Sprintf("k%d", i)
		got := tab.lookup(k)
		rate, ok := want[k]
		if ok != (got != nil) || (ok && got.limit.Rate != rate) {
			t.Fatalf("lookup %q: %v, want %d (%v)", k, got, rate, ok)
		}
	}
	if tab.lookup("") != nil {
		t.Fatal("the empty key found")
	}
}

func dup(m map[string]int, k string) bool { _, ok := m[k]; return ok }

// BenchmarkOverrideLookup finds a key's override among 10,000 (a hit) or
// not (a miss), in the override table and, side by side, in a Go map.
func BenchmarkOverrideLookup(b *testing.B) {
	tab := newTable(10_000)
	m := make(map[string]override, 10_000)
	keys := make([]string, 10_000)
	for i := range keys {
		keys[i] = fmt.Sprintf("tenant-%d", i)
		tab.insert(keys[i], override{limit: ratelimit.PerMinute(i + 1)})
		m[keys[i]] = override{limit: ratelimit.PerMinute(i + 1)}
	}
	for _, c := range []struct {
		name string
		key  string
	}{{"hit", keys[4321]}, {"miss", "tenant-none"}} {
		b.Run("table/"+c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if o := tab.lookup(c.key); (o != nil) != (c.name == "hit") {
					b.Fatal("wrong answer")
				}
			}
		})
		b.Run("map/"+c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := m[c.key]; ok != (c.name == "hit") {
					b.Fatal("wrong answer")
				}
			}
		})
	}
}
