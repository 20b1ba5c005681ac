package redisstore

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores"
)

// hotEvents collects HotKeyEvents from several Stores.
type hotEvents struct {
	mu     sync.Mutex
	events []HotKeyEvent
}

func (h *hotEvents) add(e HotKeyEvent) { h.mu.Lock(); h.events = append(h.events, e); h.mu.Unlock() }

func (h *hotEvents) count(hot, adopted bool) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, e := range h.events {
		if e.Hot == hot && (!hot || e.Adopted == adopted) {
			n++
		}
	}
	return n
}

// splitStores returns n Stores on the shared Cluster with one prefix, in
// split mode.
func splitStores(t *testing.T, n int, ev *hotEvents, cfg HotKeys, opts ...Option) []*Store {
	t.Helper()
	prefix := uniquePrefix(t)
	cfg.Mode, cfg.OnChange = HotSplit, ev.add
	peers := make([]*Store, n)
	for i := range peers {
		peers[i] = newStore(clusterClient(t), append([]Option{WithPrefix(prefix), WithHotKeys(cfg), WithoutDeniedCache()}, opts...)...)
	}
	return peers
}

// maxInWindow returns the most admissions (sorted times, µs) within any
// half-open span of w µs.
func maxInWindow(at []int64, w int64) int {
	most, j := 0, 0
	for i := range at {
		for at[i]-at[j] >= w {
			j++
		}
		most = max(most, i-j+1)
	}
	return most
}

// checkGCRABound fails t unless every span of each length holds at most
// what one exact GCRA key of l admits: Capacity + span×Rate/Period.
func checkGCRABound(t *testing.T, at []int64, l stores.Limit) {
	t.Helper()
	slices.Sort(at)
	p := l.Period.Microseconds()
	for _, w := range []int64{1, 1000, 10_000, 100_000, p / 2, p, 2 * p, 5 * p} {
		bound := l.Capacity() + int(w*int64(l.Rate)/p)
		if got := maxInWindow(at, w); got > bound {
			t.Errorf("%d admitted within %v, bound %d", got, time.Duration(w)*time.Microsecond, bound)
		}
	}
}

// TestHotSplitNeverAdmitsMoreThanOneKey drives four Stores sharing a split
// key through a hot phase (promotion, parts), a cool one (demotion back to
// the main key) and a hot one again, on a client clock in 1 ms steps: in no
// span do they admit more than one exact GCRA key would.
func TestHotSplitNeverAdmitsMoreThanOneKey(t *testing.T) {
	clock := ratelimittest.NewClock(time.Unix(1_900_000_000, 0))
	ev := &hotEvents{}
	peers := splitStores(t, 4, ev, HotKeys{Threshold: 40, Window: 100 * time.Millisecond, Shards: 3},
		WithClock(clock), WithTimeout(time.Second))
	limit := ratelimit.PerSecond(300)
	req := stores.Request{Rule: "api", Key: "198.51.100.7", Limit: limit, Cost: 1}
	r := rand.New(rand.NewPCG(3, 4))
	var admitted []int64
	ctx := context.Background()
	phase := func(d time.Duration, every int, per int) {
		for step := range int(d / time.Millisecond) {
			if step%every == 0 {
				for range per {
					res, err := peers[r.IntN(len(peers))].Take(ctx, req)
					if err != nil {
						t.Fatal(err)
					}
					if res.Allowed {
						admitted = append(admitted, clock.Now().UnixMicro())
					}
				}
			}
			clock.Advance(time.Millisecond)
		}
	}
	phase(3*time.Second, 1, 2) // 2000 checks/s: hot
	phase(3*time.Second, 2, 1) // 500 checks/s, above the limit, but cool for each Store
	phase(2*time.Second, 1, 2)
	promoted, adopted, demoted := ev.count(true, false), ev.count(true, true), ev.count(false, false)
	t.Logf("%d admitted; %d promotions, %d adoptions, %d demotions", len(admitted), promoted, adopted, demoted)
	if promoted < 2 || demoted < 1 {
		t.Errorf("want promotions in both hot phases and a demotion in the cool one")
	}
	checkGCRABound(t, admitted, limit)
	// The parts did the work: far above what the main key alone would
	// have seen rejected... and yet every admission is within the limit:
	if min := limit.Rate * 4; len(admitted) < min {
		t.Errorf("%d admitted in 8 s of a limit of 300/s, 5 of them hot: want >= %d", len(admitted), min)
	}
}

// TestHotSplitFewFalseDenials offers a split key 85% of its limit from
// four Stores, in random order: at most 1% of the checks are denied.
func TestHotSplitFewFalseDenials(t *testing.T) {
	clock := ratelimittest.NewClock(time.Unix(1_900_000_000, 0))
	ev := &hotEvents{}
	peers := splitStores(t, 4, ev, HotKeys{Threshold: 40, Window: time.Second, Shards: 3},
		WithClock(clock), WithTimeout(time.Second))
	limit := ratelimit.PerSecond(600)
	req := stores.Request{Rule: "api", Key: "203.0.113.9", Limit: limit, Cost: 1}
	r := rand.New(rand.NewPCG(5, 6))
	step := time.Duration(float64(time.Second) / (0.85 * float64(limit.Rate)))
	denied, checks := 0, 0
	for range 8 * 510 { // 8 s
		res, err := peers[r.IntN(len(peers))].Take(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		checks++
		if !res.Allowed {
			denied++
		}
		clock.Advance(step)
	}
	t.Logf("%d of %d checks denied at 85%% of the limit; %d promotions, %d adoptions", denied, checks, ev.count(true, false), ev.count(true, true))
	if ev.count(true, false)+ev.count(true, true) == 0 {
		t.Fatal("the key was never split: the test tests nothing")
	}
	if denied*100 > checks {
		t.Errorf("%d of %d checks denied below 90%% of the limit: want <= 1%%", denied, checks)
	}
}

// TestHotSplitUnderLoadServerTime runs 64 callers on four Stores against
// one split key on server time, 6,400 checks at 3,000/s: the admissions surely within any span
// (sent and answered inside it) never exceed one exact GCRA key's.
func TestHotSplitUnderLoadServerTime(t *testing.T) {
	ev := &hotEvents{}
	peers := splitStores(t, 4, ev, HotKeys{Threshold: 20, Window: time.Second, Shards: 3},
		WithTimeout(10*time.Second))
	limit := ratelimit.PerSecond(3000)
	req := stores.Request{Rule: "api", Key: "192.0.2.44", Limit: limit, Cost: 1}
	type adm struct{ sent, recv int64 }
	var mu sync.Mutex
	var all []adm
	origin := time.Now()
	var wg sync.WaitGroup
	for g := range 64 {
		wg.Go(func() {
			s := peers[g%len(peers)]
			for range 100 {
				sent := time.Since(origin).Microseconds()
				res, err := s.Take(context.Background(), req)
				recv := time.Since(origin).Microseconds()
				if err != nil {
					t.Error(err)
					return
				}
				if res.Allowed {
					mu.Lock()
					all = append(all, adm{sent, recv})
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if ev.count(true, false) == 0 {
		t.Fatal("never promoted: the test tests nothing")
	}
	// A span [a, a+w) surely holds an admission sent at or after a and
	// answered before a+w: those are at most the bound.
	slices.SortFunc(all, func(x, y adm) int { return int(x.sent - y.sent) })
	p := limit.Period.Microseconds()
	for _, w := range []int64{p / 10, p / 2, p} {
		bound := limit.Capacity() + int(w*int64(limit.Rate)/p)
		most := 0
		for i := range all {
			n := 0
			for j := i; j < len(all) && all[j].sent < all[i].sent+w; j++ {
				if all[j].recv < all[i].sent+w {
					n++
				}
			}
			most = max(most, n)
		}
		if most > bound {
			t.Errorf("%d admissions surely within %v: bound %d", most, time.Duration(w)*time.Microsecond, bound)
		}
		t.Logf("most admissions surely within %v: %d (bound %d)", time.Duration(w)*time.Microsecond, most, bound)
	}
	t.Logf("%d admitted; %d promotions, %d adoptions", len(all), ev.count(true, false), ev.count(true, true))
}

// TestHotSplitTakeAll: a TakeAll that names a split key, on a Store that
// has not seen the split yet and on one that has, is decided by the parts,
// never by the marker; when another request denies, the TakeAll is denied.
func TestHotSplitTakeAll(t *testing.T) {
	hot := stores.Request{Rule: "api", Key: "198.51.100.99", Limit: ratelimit.PerSecond(1000), Cost: 1}
	other := stores.Request{Rule: "login", Key: "u1", Limit: ratelimit.PerSecond(5), Cost: 1}
	peers, clock := splitByTakes(t, hot, 60)
	ctx := context.Background()
	results := make([]stores.Result, 2)
	for i := range 8 {
		clock.Advance(10 * time.Millisecond) // the parts refill 10 units
		s := peers[i%2]
		if err := s.TakeAll(ctx, []stores.Request{hot, other}, results); err != nil {
			t.Fatal(err)
		}
		for _, r := range results {
			if isMarker(&r) {
				t.Fatalf("TakeAll %d answered by the marker: %+v", i, results)
			}
		}
		if want := i < 5; results[0].Allowed != true || results[1].Allowed != want {
			t.Errorf("TakeAll %d: %+v, want the split key allowed and the other %v", i, results, want)
		}
	}
}

// TestHotSplitPeek: a cost-0 check of a split key reports the parts'
// units, not the marker.
func TestHotSplitPeek(t *testing.T) {
	hot := stores.Request{Rule: "api", Key: "198.51.100.98", Limit: ratelimit.PerSecond(300), Cost: 1}
	peers, clock := splitByTakes(t, hot, 40)
	ctx := context.Background()
	clock.Advance(100 * time.Millisecond) // the emptied parts refill 30 units
	peek := hot
	peek.Cost = 0
	for _, s := range peers {
		res, err := s.Take(ctx, peek)
		if err != nil || !res.Allowed || res.Remaining != 30 || isMarker(&res) {
			t.Errorf("peek: %+v, %v; want allowed with 30 remaining", res, err)
		}
	}
}

// splitByTakes returns two split-mode Stores on a client clock, after
// takes checks of req on the first have split it (threshold 40).
func splitByTakes(t *testing.T, req stores.Request, takes int) ([]*Store, *ratelimittest.Clock) {
	t.Helper()
	clock := ratelimittest.NewClock(time.Unix(1_900_000_000, 0))
	ev := &hotEvents{}
	peers := splitStores(t, 2, ev, HotKeys{Threshold: 40, Window: time.Second, Shards: 3},
		WithClock(clock), WithTimeout(time.Second))
	for range takes {
		if _, err := peers[0].Take(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	if ev.count(true, false) != 1 {
		t.Fatalf("the key was not split: %+v", ev.events)
	}
	return peers, clock
}

// TestHotSplitReturnLeavesTheMarkerAlone: a Return of a split key from a
// Store that has not followed the split (its unit was taken before the
// promotion) reaches the main key, which holds the marker; it must not
// turn the marker into an unreadable GCRA state that denies the key for
// the state's lifetime (a marker's "tat" lies ~170 years ahead).
func TestHotSplitReturnLeavesTheMarkerAlone(t *testing.T) {
	hot := stores.Request{Rule: "api", Key: "198.51.100.97", Limit: ratelimit.PerSecond(300), Cost: 1}
	peers, clock := splitByTakes(t, hot, 40)
	ctx := context.Background()
	if err := peers[1].Return(ctx, hot); err != nil {
		t.Fatal(err)
	}
	n, left, err := peers[1].readMarker(ctx, peers[1].now(), stateKey(peers[1].prefix, &hot))
	if err != nil || n != 3 || left <= 0 {
		t.Errorf("after a Return: marker of %d parts with %v left, %v; want 3 parts, still live", n, left, err)
	}
	pttl, err := peers[1].client.PTTL(ctx, stateKey(peers[1].prefix, &hot)).Result()
	if err != nil || pttl > time.Hour {
		t.Errorf("after a Return the main key lives %v (%v): want the marker's own life", pttl, err)
	}
	clock.Advance(100 * time.Millisecond) // the parts refill 30 units
	res, err := peers[1].Take(ctx, hot)
	if err != nil || !res.Allowed {
		t.Errorf("a check on the Store that returned: %+v, %v; want allowed from the parts", res, err)
	}
}

// TestHotSplitTakeAllPeek: a TakeAll with a cost-0 check of a split key is
// answered from the parts, never with the marker's wait of a century.
func TestHotSplitTakeAllPeek(t *testing.T) {
	hot := stores.Request{Rule: "api", Key: "198.51.100.95", Limit: ratelimit.PerSecond(300), Cost: 1}
	other := stores.Request{Rule: "login", Key: "u2", Limit: ratelimit.PerSecond(5), Cost: 1}
	peers, clock := splitByTakes(t, hot, 40)
	clock.Advance(100 * time.Millisecond) // the parts refill 30 units
	peek := hot
	peek.Cost = 0
	results := make([]stores.Result, 2)
	for i, s := range peers {
		if err := s.TakeAll(context.Background(), []stores.Request{peek, other}, results); err != nil {
			t.Fatal(err)
		}
		if isMarker(&results[0]) || !results[0].Allowed || !results[1].Allowed {
			t.Errorf("TakeAll %d with a peek of a split key: %+v; want both allowed, not the marker", i, results)
		}
	}
}

// TestHotSplitWithLeaseFollowsTheSplit: a split-mode Store that also
// leases every GCRA key (WithLease) follows another Store's split instead
// of answering with the marker's wait of a century.
func TestHotSplitWithLeaseFollowsTheSplit(t *testing.T) {
	hot := stores.Request{Rule: "api", Key: "198.51.100.94", Limit: ratelimit.PerSecond(300), Cost: 1}
	peers, clock := splitByTakes(t, hot, 40)
	leasing := newStore(clusterClient(t), WithPrefix(peers[0].prefix), WithClock(clock), WithTimeout(time.Second),
		WithoutDeniedCache(), WithLease(0.01, 100*time.Millisecond),
		WithHotKeys(HotKeys{Mode: HotSplit, Threshold: 40, Window: time.Second, Shards: 3}))
	clock.Advance(100 * time.Millisecond) // the parts refill 30 units
	res, err := leasing.Take(context.Background(), hot)
	if err != nil || !res.Allowed || isMarker(&res) {
		t.Errorf("a check of a split key on a leasing Store: %+v, %v; want allowed from the parts", res, err)
	}
}

// TestHotSplitSkewedClocksKeepTheBound runs the hot, cool and hot phases
// of TestHotSplitNeverAdmitsMoreThanOneKey on four Stores whose clocks
// differ by up to 90 ms (less than their 1 s budget): in no span do they
// admit more than one exact GCRA key would, plus what the skew itself lets
// a single GCRA key admit (90 ms of rate).
func TestHotSplitSkewedClocksKeepTheBound(t *testing.T) {
	base := time.Unix(1_900_000_000, 0)
	skews := []time.Duration{0, 30 * time.Millisecond, -30 * time.Millisecond, 60 * time.Millisecond}
	ev := &hotEvents{}
	prefix := uniquePrefix(t)
	clocks := make([]*ratelimittest.Clock, len(skews))
	peers := make([]*Store, len(skews))
	for i, d := range skews {
		clocks[i] = ratelimittest.NewClock(base.Add(d))
		peers[i] = newStore(clusterClient(t), WithPrefix(prefix), WithClock(clocks[i]), WithTimeout(time.Second), WithoutDeniedCache(),
			WithHotKeys(HotKeys{Mode: HotSplit, Threshold: 40, Window: 100 * time.Millisecond, Shards: 3, OnChange: ev.add}))
	}
	limit := ratelimit.PerSecond(300)
	req := stores.Request{Rule: "api", Key: "198.51.100.93", Limit: limit, Cost: 1}
	r := rand.New(rand.NewPCG(7, 8))
	var admitted []int64
	elapsed := int64(0)
	phase := func(d time.Duration, every, per int) {
		for step := range int(d / time.Millisecond) {
			if step%every == 0 {
				for range per {
					res, err := peers[r.IntN(len(peers))].Take(context.Background(), req)
					if err != nil {
						t.Fatal(err)
					}
					if res.Allowed {
						admitted = append(admitted, elapsed)
					}
				}
			}
			for _, c := range clocks {
				c.Advance(time.Millisecond)
			}
			elapsed += 1000
		}
	}
	phase(3*time.Second, 1, 2)
	phase(3*time.Second, 2, 1)
	phase(2*time.Second, 1, 2)
	if ev.count(true, false) < 2 || ev.count(false, false) < 1 {
		t.Fatalf("want promotions in both hot phases and a demotion: %d, %d", ev.count(true, false), ev.count(false, false))
	}
	slices.Sort(admitted)
	p := limit.Period.Microseconds()
	skew := int64(90_000)
	for _, w := range []int64{1, 1000, 10_000, 100_000, p / 2, p, 2 * p, 5 * p} {
		bound := limit.Capacity() + int((w+skew)*int64(limit.Rate)/p)
		if got := maxInWindow(admitted, w); got > bound {
			t.Errorf("%d admitted within %v with skewed clocks, bound %d", got, time.Duration(w)*time.Microsecond, bound)
		}
	}
	t.Logf("%d admitted; %d promotions, %d adoptions, %d demotions", len(admitted), ev.count(true, false), ev.count(true, true), ev.count(false, false))
}

// TestHotSplitSetUpMarkerLivesRefillPlusTwoBudgets: a promotion that stops
// after its first step leaves the set-up marker, which denies the key; the
// key must come back when the marker expires (its refill time plus two
// budgets), not a refill time and a budget later still.
func TestHotSplitSetUpMarkerLivesRefillPlusTwoBudgets(t *testing.T) {
	s := newStore(clusterClient(t), WithPrefix(uniquePrefix(t)), WithTimeout(time.Second),
		WithHotKeys(HotKeys{Mode: HotSplit, Shards: 3}))
	req := stores.Request{Rule: "api", Key: "198.51.100.92", Limit: ratelimit.PerSecond(300), Cost: 1}
	sp := newSplitKey(s.prefix, &req, 3)
	ctx := context.Background()
	if _, err := s.runMarker(ctx, "p", instant{}, sp); err != nil {
		t.Fatal(err)
	}
	want := time.Duration(sp.tau)*time.Microsecond + 2*time.Second // the refill time plus two budgets
	pttl, err := s.client.PTTL(ctx, sp.main).Result()
	if err != nil {
		t.Fatal(err)
	}
	if pttl > want+10*time.Millisecond {
		t.Errorf("after a set-up marker the key is denied for %v: want at most %v", pttl, want)
	}
}

// TestHotSplitSendsNoPartCallPastItsMarkerTime: on server time a Store may
// send a part's call only before the time it may use the parts (a budget
// before the marker's expiry): a check that learned it was early enough
// but whose first part answered slowly (and denied) must not go on to a
// second part after that time, where a demotion elsewhere may already
// have let the main key refill.
func TestHotSplitSendsNoPartCallPastItsMarkerTime(t *testing.T) {
	proxy := startProxy(t, sharedServer.Addr)
	req := stores.Request{Rule: "api", Key: "198.51.100.91", Limit: ratelimit.PerSecond(300), Cost: 1}
	s, sp := splitBehindProxy(t, proxy, req, 5*time.Second) // the next check starts at part 0
	ctx := context.Background()
	// The first part tried is empty for a long while, the second full.
	now, err := s.client.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.client.Set(ctx, sp.keys[0], now.Add(time.Minute).UnixMicro(), time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	const delay = time.Second
	tc, _ := s.cacheTime(instant{})
	sp.until.Store(tc + (delay / 2).Microseconds()) // the parts may be used for 500 ms more
	sp.refreshAt.Store(tc + time.Hour.Microseconds())
	proxy.SetDelay(delay) // every reply takes 1 s
	res, err := s.Take(ctx, req)
	proxy.SetDelay(0)
	if err != nil {
		t.Fatal(err)
	}
	if res.Allowed {
		t.Errorf("a check admitted by a part called after the Store's time to use the parts: %+v", res)
	}
}

// TestHotSplitMarkerDenialWaitsAtMostTheMarkersLife: a Store that does not
// follow another Store's split (no hot keys, HotLease, a TakeAll) is
// denied by the marker; its RetryAfter (an HTTP Retry-After) must not
// exceed the marker's remaining life, never the ~200 years of its "tat".
func TestHotSplitMarkerDenialWaitsAtMostTheMarkersLife(t *testing.T) {
	hot := stores.Request{Rule: "api", Key: "198.51.100.90", Limit: ratelimit.PerSecond(300), Cost: 1}
	peers, clock := splitByTakes(t, hot, 40)
	ctx := context.Background()
	clock.Advance(100 * time.Millisecond)
	n, left, err := peers[0].readMarker(ctx, peers[0].now(), stateKey(peers[0].prefix, &hot))
	if err != nil || n != 3 || left <= 0 {
		t.Fatalf("marker of %d parts with %v left, %v; want 3 parts, live", n, left, err)
	}
	opts := []Option{WithPrefix(peers[0].prefix), WithClock(clock), WithTimeout(time.Second)}
	others := map[string]*Store{
		"plain":    newStore(clusterClient(t), opts...),
		"lease":    newStore(clusterClient(t), append(opts, WithLease(0.01, 100*time.Millisecond))...),
		"hotLease": newStore(clusterClient(t), append(opts, WithHotKeys(HotKeys{Mode: HotLease, Threshold: 1, Window: time.Hour}))...),
	}
	for name, s := range others {
		for i := range 3 { // the first check, and those after it (caches, leases)
			res, err := s.Take(ctx, hot)
			if err != nil || res.Allowed || res.RetryAfter <= 0 || res.RetryAfter > left || res.ResetAfter > left {
				t.Errorf("%s Store, check %d of a split key: %+v, %v; want denied, 0 < RetryAfter, ResetAfter ≤ %v", name, i, res, err, left)
			}
		}
		results := make([]stores.Result, 1)
		if err := s.TakeAll(ctx, []stores.Request{hot}, results); err != nil || results[0].Allowed ||
			results[0].RetryAfter <= 0 || results[0].RetryAfter > left {
			t.Errorf("%s Store, TakeAll of a split key: %+v, %v; want denied with RetryAfter ≤ %v", name, results, err, left)
		}
	}
}
