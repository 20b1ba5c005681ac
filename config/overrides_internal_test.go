package config

import (
	"fmt"
	"testing"

	"github.com/sluicehq/ratelimit"
)

// BenchmarkOverrideLookup measures finding a key's override among 10,000.
func BenchmarkOverrideLookup(b *testing.B) {
	ov := &overrides{m: map[string]override{}}
	keys := make([]string, 10_000)
	for i := range keys {
		keys[i] = fmt.Sprintf("tenant-%d", i)
		ov.m[keys[i]] = override{limit: ratelimit.PerMinute(i + 1)}
	}
	for _, c := range []struct {
		name string
		key  string
	}{{"hit", keys[4321]}, {"miss", "tenant-none"}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := ov.lookup(c.key); ok != (c.name == "hit") {
					b.Fatal("wrong answer")
				}
			}
		})
	}
}
