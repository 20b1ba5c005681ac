package redisstore

import (
	"context"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores"
)

func TestHotSketchFitsIn64KiB(t *testing.T) {
	if n := unsafe.Sizeof(sketch{}); n > 64<<10 || n != sketchBytes {
		t.Fatalf("sketch is %d bytes, want %d <= 64 KiB", n, sketchBytes)
	}
}

func TestHotSketchNeverUnderestimates(t *testing.T) {
	var sk sketch
	r := rand.New(rand.NewPCG(1, 2))
	truth := map[uint64]uint32{}
	for range 200_000 {
		h := r.Uint64() % 50_000 * 0x9e3779b97f4a7c15
		truth[h]++
		if est := sk.add(h); est < truth[h] {
			t.Fatalf("estimate %d below the true count %d", est, truth[h])
		}
	}
	for h, n := range truth {
		if est := sk.estimate(h); est < n {
			t.Fatalf("estimate %d below the true count %d", est, n)
		}
	}
	sk.reset()
	for h := range truth {
		if est := sk.estimate(h); est != 0 {
			t.Fatalf("estimate %d after reset", est)
		}
	}
}

// zipfWindow feeds d one window of checks over keys drawn from z and
// returns the true counts and the keys this window promoted.
func zipfWindow(d *hotDetector, z *rand.Zipf, keys []string, checks int, t0 int64) (map[int]int, map[int]bool) {
	counts := map[int]int{}
	promoted := map[int]bool{}
	for c := range checks {
		i := int(z.Uint64())
		counts[i]++
		k := cacheKey{rule: "api", key: keys[i], alg: stores.GCRA}
		if d.lookup(k) != nil {
			continue
		}
		if e, _ := d.observe(k, t0+int64(c)*d.window/int64(checks)); e != nil {
			promoted[i] = true
		}
	}
	return counts, promoted
}

// TestHotDetectorZipfPromotesFewColdKeys feeds the detector a Zipf workload
// over 1M keys (s = 1.1, 2M checks per window, threshold 1000 checks per
// window) and counts the keys promoted whose true count in the window was
// below the threshold: at most 0.1% of the keys below the threshold, and
// every key at or above it promoted.
//
// Under -race, which makes every atomic operation several times slower, it
// runs one exponent and one window of 400k checks at a threshold of 200.
func TestHotDetectorZipfPromotesFewColdKeys(t *testing.T) {
	const universe = 1_000_000
	checks, threshold, windows, exponents := 2_000_000, 1000, 2, []float64{1.1, 1.3}
	if raceEnabled {
		checks, threshold, windows, exponents = 400_000, 200, 1, exponents[:1]
	}
	keys := make([]string, universe)
	for i := range keys {
		keys[i] = "198.51." + strconv.Itoa(i)
	}
	for _, s := range exponents {
		d := newHotDetector(HotKeys{Mode: HotLease, Threshold: threshold, Window: time.Second, MaxKeys: 1 << 20})
		z := rand.NewZipf(rand.New(rand.NewPCG(7, uint64(s*10))), s, 1, universe-1)
		var below, falsePromoted, hot, missed int
		for w := range windows {
			// A fresh detector state per window: the hot set of the first
			// window would hide the second's hot keys from the sketch.
			d.hot.Store(&map[cacheKey]*hotEntry{})
			counts, promoted := zipfWindow(d, z, keys, checks, int64(w+1)*d.window)
			for i, n := range counts {
				switch {
				case n >= threshold:
					hot++
					if !promoted[i] {
						missed++
					}
				default:
					below++
					if promoted[i] {
						falsePromoted++
					}
				}
			}
		}
		rate := float64(falsePromoted) / float64(below)
		t.Logf("zipf s=%.1f: %d keys below the threshold, %d of them promoted (%.4f%%); %d hot keys, %d missed",
			s, below, falsePromoted, 100*rate, hot, missed)
		if rate > 0.001 || missed > 0 || hot == 0 {
			t.Errorf("zipf s=%.1f: %.4f%% of cold keys promoted (want <= 0.1%%), %d of %d hot keys missed", s, 100*rate, missed, hot)
		}
	}
}

// TestHotDetectorDemotesAfterACoolWindow: a lease-mode key promoted in one
// window is judged on the next whole window, and demoted when its checks
// fall below half the threshold (or when a whole window passes without
// checks); events report both.
func TestHotDetectorDemotesAfterACoolWindow(t *testing.T) {
	var events []HotKeyEvent
	d := newHotDetector(HotKeys{Mode: HotLease, Threshold: 10, Window: time.Second, MaxKeys: 4,
		OnChange: func(e HotKeyEvent) { events = append(events, e) }})
	k := cacheKey{rule: "r", key: "k", alg: stores.GCRA}
	sec := int64(time.Second / time.Microsecond)
	check := func(at int64) {
		if e := d.lookup(k); e != nil {
			if at >= d.winEnd.Load() {
				d.report(d.rollover(at))
			}
			e.checks.Add(1)
			return
		}
		_, ev := d.observe(k, at)
		d.report(ev)
	}
	for i := range 10 {
		check(int64(i) * 1000) // window 1: 10 checks, promoted
	}
	if d.lookup(k) == nil || len(events) != 1 || !events[0].Hot {
		t.Fatalf("not promoted after 10 checks: %+v", events)
	}
	for i := range 6 {
		check(sec + int64(i)) // window 2 (promoted in 1: not judged on it): 6 >= 5
	}
	for i := range 6 {
		check(2*sec + 1000 + int64(i)) // window 3: 6 checks, still hot
	}
	if d.lookup(k) == nil {
		t.Fatalf("demoted with 6 checks a window, half the threshold is 5: %+v", events)
	}
	for i := range 4 {
		check(3*sec + 2000 + int64(i)) // window 4: 4 checks
	}
	check(4*sec + 3000) // rolls window 4 over: 4 < 5
	if d.lookup(k) != nil || len(events) != 2 || events[1].Hot || events[1].Checks != 4 {
		t.Fatalf("want a demotion after a window of 4 checks: %+v", events)
	}
}

func TestHotDetectorBoundsPromotedKeys(t *testing.T) {
	d := newHotDetector(HotKeys{Mode: HotLease, Threshold: 1, Window: time.Second, MaxKeys: 3})
	for i := range 10 {
		d.observe(cacheKey{rule: "r", key: strconv.Itoa(i)}, 1)
	}
	if n := len(*d.hot.Load()); n != 3 {
		t.Fatalf("%d keys promoted, MaxKeys 3", n)
	}
}

func TestSplitLimitsAddUpExactly(t *testing.T) {
	for _, l := range []stores.Limit{ratelimit.PerSecond(100), ratelimit.PerSecond(1001), ratelimit.PerMinute(37).WithBurst(95), {Rate: 64, Period: time.Hour, Burst: 31}} {
		for shards := 1; shards <= 20; shards++ {
			n := splitShards(l, shards)
			if n == 0 {
				if min(l.Rate, l.Capacity()) >= 2*MinShardUnits && shards >= 2 {
					t.Errorf("%+v over %d: not split", l, shards)
				}
				continue
			}
			rate, burst := 0, 0
			for _, p := range splitLimits(l, n) {
				if p.Rate < MinShardUnits || p.Capacity() < MinShardUnits || p.Period != l.Period {
					t.Errorf("%+v over %d: part %+v", l, n, p)
				}
				rate, burst = rate+p.Rate, burst+p.Capacity()
			}
			if rate != l.Rate || burst != l.Capacity() || n > shards {
				t.Errorf("%+v over %d parts: rates add to %d, capacities to %d", l, n, rate, burst)
			}
		}
	}
}

// TestSplitPartsOnDistinctSlotRanges: the parts of a key land in distinct
// thirds of the slot space (distinct primaries of a default 3-primary
// Cluster), are the same for every Store, and never equal a user key's.
func TestSplitPartsOnDistinctSlotRanges(t *testing.T) {
	for _, key := range []string{"", "%", "}", "198.51.100.7", "a%H1", "x}y%z"} {
		req := stores.Request{Rule: "api", Key: key, Limit: ratelimit.PerSecond(300)}
		a, b := newSplitKey("p:", &req, 3), newSplitKey("p:", &req, 3)
		seen := map[int]bool{}
		for i, k := range a.keys {
			if k != b.keys[i] {
				t.Errorf("key %q: part %d differs between Stores: %q, %q", key, i, k, b.keys[i])
			}
			third := int(slot(k)) * 3 / 16384
			if third != i || seen[third] {
				t.Errorf("key %q: part %d in slot %d", key, i, slot(k))
			}
			seen[third] = true
			user := req
			user.Key = hashTag(k)
			if stateKey("p:", &user) == k {
				t.Errorf("part %q is the key of user key %q", k, user.Key)
			}
		}
	}
}

// TestHotLeasePromotesOnlyHotKeys: in HotLease mode a key past the
// threshold is served from leases, the cold keys of the same Store never
// are, and the promotion is reported.
func TestHotLeasePromotesOnlyHotKeys(t *testing.T) {
	clock := ratelimittest.NewClock(time.Unix(1_900_000_000, 0))
	var events []HotKeyEvent
	s := newStore(standaloneClient(t), WithPrefix(uniquePrefix(t)), WithClock(clock),
		WithHotKeys(HotKeys{Mode: HotLease, Threshold: 20, Window: time.Second, LeaseFraction: 0.1,
			OnChange: func(e HotKeyEvent) { events = append(events, e) }}))
	limit := ratelimit.PerSecond(1000)
	ctx := context.Background()
	for i := range 200 {
		if _, err := s.Take(ctx, stores.Request{Rule: "api", Key: "hot", Limit: limit, Cost: 1}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Take(ctx, stores.Request{Rule: "api", Key: "cold" + strconv.Itoa(i%50), Limit: limit, Cost: 1}); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Millisecond)
	}
	if len(events) != 1 || events[0].Key != "hot" || !events[0].Hot || events[0].Mode != HotLease {
		t.Fatalf("events %+v: want one promotion of the hot key", events)
	}
	// 180 checks of the hot key after its promotion, leases of 100 units.
	if hits := s.Stats().LeaseHits; hits < 150 {
		t.Errorf("%d checks served from leases, want the hot key's (>= 150)", hits)
	}
	for i := range s.leases.shards {
		for k := range s.leases.shards[i].m {
			if k.key != "hot" {
				t.Errorf("cold key %q got a lease", k.key)
			}
		}
	}
}

func TestWithHotKeysPanicsOnBadConfig(t *testing.T) {
	for _, h := range []HotKeys{{Threshold: -1}, {Window: -time.Second}, {Shards: -2}, {LeaseFraction: 1.5}, {Mode: 9}, {MaxKeys: -1}} {
		func() {
			defer func() {
				if r := recover(); r == nil {
					t.Errorf("WithHotKeys(%+v) did not panic", h)
				}
			}()
			WithHotKeys(h)
		}()
	}
}

// TestHotDetectorKeysNamedLikeRulesStayApart: a client key equal to a
// rule's name is a key like any other for the detector: (rule a, key b)
// and (rule b, key a) are two keys, and so are keys equal to their own
// rule, each below the threshold, none promoted.
func TestHotDetectorKeysNamedLikeRulesStayApart(t *testing.T) {
	d := newHotDetector(HotKeys{Mode: HotLease, Threshold: 100, Window: time.Second, MaxKeys: 16})
	pairs := []cacheKey{
		{rule: "api", key: "login"}, {rule: "login", key: "api"},
		{rule: "api", key: "api"}, {rule: "login", key: "login"}, {rule: "search", key: "search"},
	}
	for range 60 {
		for _, k := range pairs {
			if e, _ := d.observe(k, 1); e != nil {
				t.Fatalf("%+v promoted after at most 60 checks, threshold 100", k)
			}
		}
	}
}
