package difftest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
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
	// The last slot each store gave a (rule, key): a Concurrency token is
	// drawn from its shard's counter, so another rule's token may name
	// this rule's slots in one store and nothing in the other.
	slots := map[[2]string][2]uint64{}
	ctx := context.Background()
	for i := 0; i < 20_000; i++ {
		clock.Advance(time.Duration(rng.Int64N(int64(50 * time.Millisecond))))
		req := randomRequest(rng)
		where := fmt.Sprintf("op %d (%s %v %v cost %d)", i, req.Key, req.Algorithm, req.Limit, req.Cost)
		switch rng.IntN(8) {
		case 0:
			alg := ratelimit.Algorithm(rng.IntN(7)) // 5 and 6 name no algorithm
			ea := a.(ratelimit.Resetter).Reset(ctx, req.Rule, req.Key, alg)
			eb := b.(ratelimit.Resetter).Reset(ctx, req.Rule, req.Key, alg)
			sameError(t, where+" Reset", ea, eb)
		case 1:
			s := slots[[2]string{req.Rule, req.Key}]
			req.Slot = s[0]
			ea := a.Return(ctx, req)
			req.Slot = s[1]
			eb := b.Return(ctx, req)
			sameError(t, where+" Return", ea, eb)
		case 2:
			reqs := []ratelimit.Request{req, randomRequest(rng)}
			ra, rb := make([]ratelimit.Result, 2), make([]ratelimit.Result, 2)
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
				slots[[2]string{req.Rule, req.Key}] = [2]uint64{ra.Slot, rb.Slot}
			}
		}
	}
}

// randomRequest picks one of a few keys and rules so that operations meet,
// and now and then an invalid cost or an unknown algorithm.
func randomRequest(rng *rand.Rand) ratelimit.Request {
	alg := ratelimit.Algorithm(rng.IntN(5))
	if rng.IntN(50) == 0 {
		alg = ratelimit.Algorithm(5 + rng.IntN(251))
	}
	limit := ratelimit.Limit{Rate: 1 + rng.IntN(5), Period: time.Duration(1+rng.IntN(4)) * 100 * time.Millisecond}
	return ratelimit.Request{
		Rule:      fmt.Sprint("r", rng.IntN(2)),
		Key:       fmt.Sprint("k", rng.IntN(4)),
		Limit:     limit,
		Algorithm: alg,
		Cost:      rng.IntN(limit.Rate+2) - 1 + rng.IntN(2), // -1 … Rate+1
	}
}

func sameError(t *testing.T, where string, a, b error) {
	t.Helper()
	for _, target := range []error{nil, ratelimit.ErrInvalidRequest, ratelimit.ErrInvalidLimit} {
		if (target == nil && (a == nil) != (b == nil)) || (target != nil && errors.Is(a, target) != errors.Is(b, target)) {
			t.Fatalf("%s: errors differ: %v and %v", where, a, b)
		}
	}
}

func sameResult(t *testing.T, where string, a, b ratelimit.Result) {
	t.Helper()
	if (a.Slot != 0) != (b.Slot != 0) {
		t.Fatalf("%s: slots differ: %d and %d\n%+v\n%+v", where, a.Slot, b.Slot, a, b)
	}
	a.Slot, b.Slot = 0, 0
	if a != b {
		t.Fatalf("%s: results differ:\n%+v\n%+v", where, a, b)
	}
}
