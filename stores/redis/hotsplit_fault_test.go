package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores"
)

// splitBehindProxy returns a split-mode Store whose Redis calls go
// through proxy, after its checks of req have split the key (threshold 5,
// one window per hour, so no refresh call in the test), with every part
// full.
func splitBehindProxy(t *testing.T, proxy *faultProxy, req stores.Request, budget time.Duration) (*Store, *splitKey) {
	t.Helper()
	ev := &hotEvents{}
	s := newStore(faultClient(proxy.Addr()), WithPrefix(uniquePrefix(t)), WithTimeout(budget), WithoutDeniedCache(),
		WithHotKeys(HotKeys{Mode: HotSplit, Threshold: 5, Window: time.Hour, Shards: 3, OnChange: ev.add}))
	ctx := context.Background()
	for range 5 {
		if _, err := s.Take(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	e := s.hot.lookup(cacheKey{req.Rule, req.Key, req.Algorithm})
	if e == nil || e.split.Load() == nil {
		t.Fatalf("the key was not split: %+v", ev.events)
	}
	sp := e.split.Load()
	if err := s.client.Del(ctx, sp.keys...).Err(); err != nil { // one server: one DEL
		t.Fatal(err)
	}
	sp.next.Store(uint32(sp.n - 1)) // the next check starts at part 0
	for i := range sp.denied {
		sp.denied[i].Store(0) // and knows of no empty part
	}
	return s, sp
}

// TestHotSplitPartFailureTriesAnotherPart: a split check whose part's
// call fails (its primary down: the reply is lost, the connection closed)
// is answered by another part, not with that part's error.
func TestHotSplitPartFailureTriesAnotherPart(t *testing.T) {
	proxy := startProxy(t, sharedServer.Addr)
	req := stores.Request{Rule: "api", Key: "198.51.100.89", Limit: ratelimit.PerSecond(300), Cost: 1}
	s, _ := splitBehindProxy(t, proxy, req, 5*time.Second)
	proxy.DropReplies(1) // part 0's reply
	res, err := s.Take(context.Background(), req)
	select {
	case <-proxy.dropped:
	default:
		t.Fatal("no reply was dropped")
	}
	if err != nil || !res.Allowed {
		t.Errorf("a check whose first part failed: %+v, %v; want allowed by another part", res, err)
	}
}

// TestHotSplitAllPartsFailingIsAnError: when no part answers, the check
// fails with the error (the rule's failure policy decides), within one
// budget per part.
func TestHotSplitAllPartsFailingIsAnError(t *testing.T) {
	proxy := startProxy(t, sharedServer.Addr)
	req := stores.Request{Rule: "api", Key: "198.51.100.88", Limit: ratelimit.PerSecond(300), Cost: 1}
	const budget = time.Second
	s, sp := splitBehindProxy(t, proxy, req, budget)
	proxy.SetSilent(true)
	start := time.Now()
	res, err := s.Take(context.Background(), req)
	took := time.Since(start)
	proxy.SetSilent(false)
	if err == nil {
		t.Errorf("a check with every part down: %+v, no error; want the parts' error", res)
	}
	if bound := time.Duration(sp.n)*budget + budget; took > bound {
		t.Errorf("a check with every part down took %v, want at most %v", took, bound)
	}
}

// TestHotSplitFailedPromotionIsAnErrorNotADenial: a promotion that fails
// on a Redis error after setting the set-up marker (a part's script fails)
// returns the error to the check, and undoes the marker: the key is back
// on its main key one budget plus one interval later, not denied for its
// refill time plus two budgets.
func TestHotSplitFailedPromotionIsAnErrorNotADenial(t *testing.T) {
	clock := ratelimittest.NewClock(time.Unix(1_900_000_000, 0))
	prefix := uniquePrefix(t)
	s := newStore(clusterClient(t), WithPrefix(prefix), WithClock(clock), WithTimeout(time.Second), WithoutDeniedCache(),
		WithHotKeys(HotKeys{Mode: HotSplit, Threshold: 5, Window: time.Hour, Shards: 3}))
	plain := newStore(clusterClient(t), WithPrefix(prefix), WithClock(clock), WithTimeout(time.Second), WithoutDeniedCache())
	req := stores.Request{Rule: "api", Key: "198.51.100.87", Limit: ratelimit.PerSecond(300), Cost: 1}
	ctx := context.Background()
	sp := newSplitKey(prefix, &req, 3)
	if err := s.client.HSet(ctx, sp.keys[1], "x", "y").Err(); err != nil { // part 1's script fails (WRONGTYPE)
		t.Fatal(err)
	}
	if err := s.client.Expire(ctx, sp.keys[1], time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if _, err := s.Take(ctx, req); err != nil {
			t.Fatalf("check %d: %v", i, err)
		}
	}
	if res, err := s.Take(ctx, req); err == nil { // the promotion
		t.Errorf("the check whose promotion failed: %+v, no error; want the error", res)
	}
	// The set-up marker would deny for 1 s (tau) + 2 budgets; the undone
	// key gives its first unit a budget plus one interval later.
	clock.Advance(time.Second + 10*time.Millisecond)
	for name, st := range map[string]*Store{"promoting": s, "plain": plain} {
		if res, err := st.Take(ctx, req); err != nil || !res.Allowed {
			t.Errorf("%s Store 1.01 s after a failed promotion: %+v, %v; want allowed", name, res, err)
		}
	}
}
