package memstore

import (
	"strconv"
	"testing"
	"time"
)

// BenchmarkPreparedSlots measures a Concurrency acquisition and its release
// through a Prepared check, as the middleware's direct path makes them (by
// key, and through a Held on the stack): on one key from every core (the
// shard's hot key) and on 10,000 keys.
func BenchmarkPreparedSlots(b *testing.B) {
	for _, held := range []bool{false, true} {
		for _, keys := range []int{1, 10_000} {
			name := "key/keys=" + strconv.Itoa(keys)
			if held {
				name = "held/keys=" + strconv.Itoa(keys)
			}
			b.Run(name, func(b *testing.B) {
				s := New(Config{})
				l := Limit{Rate: 1000, Period: int64(time.Minute)}
				p := s.Prepare(Request{Rule: "inflight", Alg: Concurrency, Limit: l, Cost: 1})
				parallelOnKeys(b, keys, func() func(string, int64) {
					return func(key string, now int64) {
						if held {
							var hd Held
							res := p.TakeHeld(key, now, &hd)
							if !res.Allowed {
								b.Error("denied")
							}
							p.ReleaseHeld(&hd, res.Slot, now)
							return
						}
						res := p.Take(key, now)
						if !res.Allowed {
							b.Error("denied")
						}
						p.Release(key, res.Slot, now)
					}
				})
			})
		}
	}
}
