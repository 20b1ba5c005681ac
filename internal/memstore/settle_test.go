package memstore

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// TestPreparedSettlesAsTakeAndReturn: a prepared check's settlement
// changes the state as Take with Force (a charge) or Return (a refund) of
// the same request does, aimed at the admission's slot or at none: takes
// and settlements interleaved on one store through the prepared check
// agree, result for result, with the same ones through Take and Return on
// a twin store, for every algorithm a settled rule's direct path prepares.
func TestPreparedSettlesAsTakeAndReturn(t *testing.T) {
	type admission struct {
		key  string
		slot uint64
	}
	for _, alg := range []Alg{GCRA, SlidingWindow, FixedWindow, SlidingLog} {
		l := Limit{Rate: 20, Period: int64(time.Second), Capacity: 20}
		a, b := New(Config{MaxKeys: 4096}), New(Config{MaxKeys: 4096})
		p := a.Prepare(Request{Rule: "r", Alg: alg, Limit: l, Cost: 1})
		rng := rand.New(rand.NewPCG(11, uint64(alg)))
		now := int64(1_700_000_000) * int64(time.Second)
		var pending []admission
		settled := 0
		for i := range 20_000 {
			now += rng.Int64N(int64(time.Second) / 40)
			key := fmt.Sprint("k", rng.IntN(8))
			req := Request{Rule: "r", Key: key, Alg: alg, Limit: l, Cost: 1}
			got := p.Take(key, now)
			if want := b.Take(&req, now); got != want {
				t.Fatalf("%v take %d (%s at %d): got %+v, want %+v", alg, i, key, now, got, want)
			}
			if got.Allowed {
				pending = append(pending, admission{key, got.Slot})
			}
			if len(pending) == 0 || rng.IntN(2) == 0 {
				continue
			}
			j := rng.IntN(len(pending))
			ad := pending[j]
			pending = append(pending[:j], pending[j+1:]...)
			slot := ad.slot
			if rng.IntN(4) == 0 {
				slot = 0
			}
			delta := rng.Int64N(9) - 3 // a refund of up to 3, a charge of up to 5
			p.Settle(ad.key, slot, delta, now)
			req = Request{Rule: "r", Key: ad.key, Alg: alg, Limit: l, Slot: slot}
			switch {
			case delta > 0:
				req.Cost, req.Force = delta, true
				b.Take(&req, now)
			case delta < 0:
				req.Cost = -delta
				b.Return(&req, now)
			}
			settled++
		}
		if settled < 5000 {
			t.Fatalf("%v: %d settlements: the test does not exercise them", alg, settled)
		}
	}
}
