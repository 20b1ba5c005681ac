package redisstore

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/stores"
)

// TestHotSplitOtherLimitFollowsTheMarkersParts: during a configuration
// rollout a split-mode Store whose limit for the key would give another
// part count (25/s: 2 parts of 10 units, where the marker says 3) follows
// the marker's 3 parts with its own limit divided in 3, instead of being
// denied on every check while the split lasts.
func TestHotSplitOtherLimitFollowsTheMarkersParts(t *testing.T) {
	hot := stores.Request{Rule: "api", Key: "198.51.100.86", Limit: ratelimit.PerSecond(300), Cost: 1}
	peers, clock := splitByTakes(t, hot, 40)
	small := hot
	small.Limit = ratelimit.PerSecond(25)
	if splitShards(small.Limit, 3) == 3 {
		t.Fatal("the test needs a limit that gives fewer parts than the marker")
	}
	clock.Advance(300 * time.Millisecond) // the emptied parts refill for either limit
	ctx := context.Background()
	allowed := 0
	for range 5 {
		res, err := peers[1].Take(ctx, small)
		if err != nil {
			t.Fatal(err)
		}
		if res.Allowed {
			allowed++
		}
	}
	if allowed == 0 {
		t.Errorf("a Store with another limit was denied on every check of a split key")
	}
	n, left, err := peers[1].readMarker(ctx, peers[1].now(), stateKey(peers[1].prefix, &hot))
	if err != nil || n != 3 {
		t.Fatalf("after the other limit's checks: a marker of %d parts (%v); want the split of 3 intact", n, err)
	}
	// A limit too small for 3 parts of one unit is denied while the marker
	// lives, and told to retry no later than its expiry.
	tiny := hot
	tiny.Limit = ratelimit.PerSecond(2)
	res, err := peers[1].Take(ctx, tiny)
	if err != nil || res.Allowed || res.RetryAfter <= 0 || res.RetryAfter > left {
		t.Errorf("a limit too small for the marker's parts: %+v, %v; want denied with 0 < RetryAfter ≤ %v", res, err, left)
	}
}

// TestHotSplitDemotionIgnoresAnotherPartCount: a Store whose own split of
// the key has 2 parts (an earlier configuration) and whose time to use
// them has passed must not follow a marker of 3 parts with its 2 parts
// (keys no other Store uses, never emptied: a second full limit): it
// drops its split and adopts the marker's.
func TestHotSplitDemotionIgnoresAnotherPartCount(t *testing.T) {
	hot := stores.Request{Rule: "api", Key: "198.51.100.85", Limit: ratelimit.PerSecond(300), Cost: 1}
	peers, clock := splitByTakes(t, hot, 40)
	s := peers[1]
	k := cacheKey{hot.Rule, hot.Key, hot.Algorithm}
	old := newSplitKey(s.prefix, &hot, 2)
	tc, _ := s.cacheTime(s.now())
	s.activate(old, tc, 0) // its time to use the parts is over: the next check runs "d"
	e := &hotEntry{key: k, since: s.hot.winSeq.Load()}
	e.split.Store(old)
	s.hot.mu.Lock()
	s.hot.put(k, e)
	s.hot.mu.Unlock()
	clock.Advance(100 * time.Millisecond) // the 3 parts refill 30 units
	ctx := context.Background()
	res, err := s.Take(ctx, hot)
	if err != nil || !res.Allowed {
		t.Errorf("a check on the Store with the old split: %+v, %v; want allowed from the marker's parts", res, err)
	}
	cur := newSplitKey(s.prefix, &hot, 3)
	for _, key := range old.keys { // in other slots: one at a time
		if slices.Contains(cur.keys, key) {
			continue // a part of both layouts
		}
		if got, err := s.client.Exists(ctx, key).Result(); err != nil || got != 0 {
			t.Errorf("the 2-part layout's key %s was written (%v): want none", key, err)
		}
	}
	if e := s.hot.lookup(k); e == nil || e.split.Load() == nil || e.split.Load().n != 3 {
		t.Errorf("the Store did not adopt the marker's 3 parts")
	}
}
