package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores"
)

// TestEmptyingAPartKeepsItsDebt: a GCRA state carries its interval
// ("<tat>:<t>"), and the split protocol's emptying of a part (tat =
// max(tat, now+tau)) must still read its time: a part owing more than its
// tau keeps that debt rather than being reset to tau.
func TestEmptyingAPartKeepsItsDebt(t *testing.T) {
	ctx := context.Background()
	clock := ratelimittest.NewClock(ratelimittest.Epoch())
	s := newStore(standaloneClient(t), WithClock(clock), WithPrefix(uniquePrefix(t)))
	req := stores.Request{Rule: "r", Key: "part", Limit: ratelimit.PerMinute(10), Cost: 10}
	if res, err := s.Take(ctx, req); err != nil || !res.Allowed {
		t.Fatalf("Take: %+v, %v", res, err)
	}
	settle := req
	settle.Force = true // 10 more units spent: two minutes owed in all
	if _, err := s.Take(ctx, settle); err != nil {
		t.Fatal(err)
	}
	tau := time.Minute.Microseconds()
	if err := s.emptyPart(ctx, at(clock.Now()), stateKey(s.prefix, &req), tau); err != nil {
		t.Fatal(err)
	}
	req.Cost = 0
	res, err := s.Take(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if want := 66 * time.Second; res.RetryAfter != want { // 2m owed - 1m of burst + one 6s unit
		t.Fatalf("after emptying: RetryAfter %v, want %v (the debt kept)", res.RetryAfter, want)
	}
}
