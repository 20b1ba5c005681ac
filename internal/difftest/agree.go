package difftest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores"
)

// AdaptersAgree drives two stores with the same random operations (Take,
// TakeAll, Return and Reset on every algorithm, valid and invalid requests,
// unknown algorithms included) on one clock and requires the same answer
// from both every time: the same Result (a Concurrency slot token only
// nonzero on both sides, since tokens are each store's own) and errors that
// match the same sentinels.
func AdaptersAgree(t *testing.T, newA, newB NewStore) {
	rng := rand.New(rand.NewPCG(3, 4))
	clock := ratelimittest.NewClock(ratelimittest.Epoch())
	a, b := newA(clock), newB(clock)
	slots := map[string][2]uint64{} // the last slot each store gave a key
	ctx := context.Background()
	for i := 0; i < 20_000; i++ {
		clock.Advance(time.Duration(rng.Int64N(int64(50 * time.Millisecond))))
		req := randomRequest(rng)
		where := fmt.Sprintf("op %d (%s %v %v cost %d)", i, req.Key, req.Algorithm, req.Limit, req.Cost)
		switch rng.IntN(8) {
		case 0:
			alg := stores.Algorithm(rng.IntN(6)) // 4 and 5 name no algorithm
			ea := a.(stores.Resetter).Reset(ctx, req.Rule, req.Key, alg)
			eb := b.(stores.Resetter).Reset(ctx, req.Rule, req.Key, alg)
			sameError(t, where+" Reset", ea, eb)
		case 1:
			s := slots[req.Key]
			req.Slot = s[0]
			ea := a.Return(ctx, req)
			req.Slot = s[1]
			eb := b.Return(ctx, req)
			sameError(t, where+" Return", ea, eb)
		case 2:
			reqs := []stores.Request{req, randomRequest(rng)}
			ra, rb := make([]stores.Result, 2), make([]stores.Result, 2)
			ea, eb := a.TakeAll(ctx, reqs, ra), b.TakeAll(ctx, reqs, rb)
			sameError(t, where+" TakeAll", ea, eb)
			for j := range reqs {
				sameResult(t, where+" TakeAll", ra[j], rb[j])
			}
		default:
			ra, ea := a.Take(ctx, req)
			rb, eb := b.Take(ctx, req)
			sameError(t, where+" Take", ea, eb)
			sameResult(t, where+" Take", ra, rb)
			if ra.Slot != 0 {
				slots[req.Key] = [2]uint64{ra.Slot, rb.Slot}
			}
		}
	}
}

// randomRequest picks one of a few keys and rules so that operations meet,
// and now and then an invalid cost or an unknown algorithm.
func randomRequest(rng *rand.Rand) stores.Request {
	alg := stores.Algorithm(rng.IntN(4))
	if rng.IntN(50) == 0 {
		alg = stores.Algorithm(4 + rng.IntN(252))
	}
	limit := stores.Limit{Rate: 1 + rng.IntN(5), Period: time.Duration(1+rng.IntN(4)) * 100 * time.Millisecond}
	return stores.Request{
		Rule:      fmt.Sprint("r", rng.IntN(2)),
		Key:       fmt.Sprint("k", rng.IntN(4)),
		Limit:     limit,
		Algorithm: alg,
		Cost:      rng.IntN(limit.Rate+2) - 1 + rng.IntN(2), // -1 … Rate+1
	}
}

func sameError(t *testing.T, where string, a, b error) {
	t.Helper()
	for _, target := range []error{nil, stores.ErrInvalidRequest, stores.ErrInvalidLimit} {
		if (target == nil && (a == nil) != (b == nil)) || (target != nil && errors.Is(a, target) != errors.Is(b, target)) {
			t.Fatalf("%s: errors differ: %v and %v", where, a, b)
		}
	}
}

func sameResult(t *testing.T, where string, a, b stores.Result) {
	t.Helper()
	if (a.Slot != 0) != (b.Slot != 0) {
		t.Fatalf("%s: slots differ: %d and %d", where, a.Slot, b.Slot)
	}
	a.Slot, b.Slot = 0, 0
	if a != b {
		t.Fatalf("%s: results differ:\n%+v\n%+v", where, a, b)
	}
}
