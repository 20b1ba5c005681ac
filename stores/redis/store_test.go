package redisstore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores"
)

// backends are the client kinds every conformance and differential test
// runs on.
var backends = []struct {
	name   string
	client func(t testing.TB) redis.UniversalClient
}{
	{"standalone", func(t testing.TB) redis.UniversalClient { return standaloneClient(t) }},
	{"cluster", func(t testing.TB) redis.UniversalClient { return clusterClient(t) }},
	{"ring", func(t testing.TB) redis.UniversalClient { return ringClient(t) }},
}

func TestConformance(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			client := b.client(t)
			ratelimittest.TestStore(t, func(t *testing.T, clock stores.Clock) stores.Store {
				return newStore(client, WithClock(clock), WithPrefix(uniquePrefix(t)))
			})
		})
	}
}

// testBudget is the time budget of the stores the tests build with
// newStore: a loaded machine must never fail a test whose subject is not the
// budget. The tests of the budget pass WithTimeout themselves, and those of
// the default (DefaultTimeout) call New.
const testBudget = time.Minute

// newStore is New with a budget of testBudget, which opts may override.
func newStore(client redis.UniversalClient, opts ...Option) *Store {
	return New(client, append([]Option{WithTimeout(testBudget)}, opts...)...)
}

func gcraReq(key string, l stores.Limit, cost int) stores.Request {
	return stores.Request{Rule: "test", Key: key, Limit: l, Cost: cost}
}

func withAlg(r stores.Request, a stores.Algorithm) stores.Request {
	r.Algorithm = a
	return r
}

func mustTake(t *testing.T, s stores.Store, req stores.Request) stores.Result {
	t.Helper()
	res, err := s.Take(context.Background(), req)
	if err != nil {
		t.Fatalf("Take(%s): %v", req.Key, err)
	}
	return res
}

func within(t *testing.T, what string, d, lo, hi time.Duration) {
	t.Helper()
	if d < lo || d > hi {
		t.Errorf("%s = %v, want within [%v, %v]", what, d, lo, hi)
	}
}

// TestServerTime checks every algorithm with the Redis server's clock.
func TestServerTime(t *testing.T) {
	for _, b := range backends[:2] {
		t.Run(b.name, func(t *testing.T) {
			s := newStore(b.client(t), WithPrefix(uniquePrefix(t)))
			req := gcraReq("k", ratelimit.PerMinute(3), 1)
			for i := 2; i >= 0; i-- {
				res := mustTake(t, s, req)
				if !res.Allowed || res.Remaining != i || res.Limit != req.Limit {
					t.Fatalf("take: %+v, want allowed with %d remaining", res, i)
				}
			}
			res := mustTake(t, s, req)
			if res.Allowed || res.Remaining != 0 {
				t.Fatalf("4th take of 3/min: %+v", res)
			}
			within(t, "RetryAfter", res.RetryAfter, 15*time.Second, 20*time.Second)
			within(t, "ResetAfter", res.ResetAfter, 55*time.Second, 60*time.Second)

			sw := withAlg(gcraReq("k", ratelimit.PerMinute(2), 2), stores.SlidingWindow)
			if res := mustTake(t, s, sw); !res.Allowed || res.Remaining != 0 {
				t.Fatalf("sliding take: %+v", res)
			}
			sw.Cost = 1
			if res := mustTake(t, s, sw); res.Allowed || res.RetryAfter <= 0 || res.RetryAfter > 2*time.Minute {
				t.Fatalf("sliding deny: %+v", res)
			}

			fw := withAlg(gcraReq("k", ratelimit.PerHour(1), 1), stores.FixedWindow)
			if res := mustTake(t, s, fw); !res.Allowed || res.ResetAfter <= 0 || res.ResetAfter > time.Hour {
				t.Fatalf("fixed take: %+v", res)
			}
			if res := mustTake(t, s, fw); res.Allowed || res.RetryAfter != res.ResetAfter {
				t.Fatalf("fixed deny: %+v", res)
			}

			cc := withAlg(gcraReq("k", stores.Limit{Rate: 1, Period: time.Minute}, 1), stores.Concurrency)
			if res := mustTake(t, s, cc); !res.Allowed {
				t.Fatalf("acquire: %+v", res)
			}
			if res := mustTake(t, s, cc); res.Allowed || res.RetryAfter != time.Second {
				t.Fatalf("acquire when full: %+v", res)
			}
			if err := s.Return(context.Background(), cc); err != nil {
				t.Fatal(err)
			}
			if res := mustTake(t, s, cc); !res.Allowed {
				t.Fatalf("acquire after release: %+v", res)
			}

			res2 := make([]stores.Result, 2)
			reqs := []stores.Request{gcraReq("a", ratelimit.PerHour(2), 1), gcraReq("b", ratelimit.PerHour(1), 1)}
			if err := s.TakeAll(context.Background(), reqs, res2); err != nil || !res2[0].Allowed || !res2[1].Allowed {
				t.Fatalf("TakeAll: %+v, %v", res2, err)
			}
			if err := s.TakeAll(context.Background(), reqs, res2); err != nil || !res2[0].Allowed || res2[1].Allowed || res2[0].Remaining != 1 {
				t.Fatalf("denied TakeAll: %+v, %v", res2, err)
			}
		})
	}
}

// TestServerTimeIgnoresClientClock shows that a server-time Store does not
// read the client's clock: state written by a client clock ten years behind
// is long past on the server's clock.
func TestServerTimeIgnoresClientClock(t *testing.T) {
	client := standaloneClient(t)
	prefix := uniquePrefix(t)
	past := ratelimittest.NewClock(time.Now().AddDate(-10, 0, 0))
	behind := newStore(client, WithPrefix(prefix), WithClock(past))
	server := newStore(client, WithPrefix(prefix))
	req := gcraReq("k", ratelimit.PerHour(1), 1)
	if res := mustTake(t, behind, req); !res.Allowed {
		t.Fatal(res)
	}
	if res := mustTake(t, behind, req); res.Allowed {
		t.Fatalf("the client-clocked store should see its own take: %+v", res)
	}
	if res := mustTake(t, server, req); !res.Allowed || res.Remaining != 0 {
		t.Fatalf("server time should be ten years later: %+v", res)
	}
}

func TestTTLs(t *testing.T) {
	for _, b := range backends[:2] {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			client := b.client(t)
			prefix := uniquePrefix(t)
			s := newStore(client, WithPrefix(prefix))
			ttl := func(req stores.Request) time.Duration {
				t.Helper()
				d, err := client.PTTL(ctx, stateKey(prefix, &req)).Result()
				if err != nil {
					t.Fatal(err)
				}
				return d
			}
			// A sub-millisecond interval still gets a TTL of at least 1ms.
			tiny := gcraReq("tiny", stores.Limit{Rate: 1, Period: 100 * time.Microsecond}, 1)
			mustTake(t, s, tiny)
			if d := ttl(tiny); d == -1 { // -2: already expired; 0: under 1ms left
				t.Errorf("PTTL of a 100µs key = %v", d)
			}
			g := gcraReq("g", ratelimit.PerSecond(10), 3)
			mustTake(t, s, g)
			within(t, "GCRA PTTL", ttl(g), time.Millisecond, 300*time.Millisecond)
			sw := withAlg(gcraReq("s", ratelimit.PerSecond(10), 3), stores.SlidingWindow)
			mustTake(t, s, sw)
			within(t, "sliding PTTL", ttl(sw), time.Second, 2*time.Second)
			fw := withAlg(gcraReq("f", ratelimit.PerHour(10), 3), stores.FixedWindow)
			mustTake(t, s, fw)
			within(t, "fixed PTTL", ttl(fw), time.Millisecond, time.Hour)
			cc := withAlg(gcraReq("c", stores.Limit{Rate: 5, Period: time.Minute}, 2), stores.Concurrency)
			mustTake(t, s, cc)
			within(t, "concurrency PTTL", ttl(cc), 59*time.Second, time.Minute)

			// A refund keeps a TTL, and never creates a key.
			for _, r := range []stores.Request{sw, fw, cc} {
				r.Cost = 1
				if err := s.Return(ctx, r); err != nil {
					t.Fatal(err)
				}
				if d := ttl(r); d <= 0 {
					t.Errorf("%v: PTTL after Return = %v", r.Algorithm, d)
				}
			}
			for _, a := range []ratelimit.Algorithm{ratelimit.GCRA, ratelimit.SlidingWindow, ratelimit.FixedWindow, ratelimit.Concurrency, ratelimit.SlidingLog} {
				r := withAlg(gcraReq("absent", ratelimit.PerMinute(5), 1), a)
				if err := s.Return(ctx, r); err != nil {
					t.Fatal(err)
				}
				if n := client.Exists(ctx, stateKey(prefix, &r)).Val(); n != 0 {
					t.Errorf("%v: Return created a key", a)
				}
			}
			// A full refund of GCRA deletes the key: its state is a full bucket.
			g.Cost = 3
			if err := s.Return(ctx, g); err != nil {
				t.Fatal(err)
			}
			if n := client.Exists(ctx, stateKey(prefix, &g)).Val(); n != 0 {
				t.Errorf("GCRA key left after a full refund")
			}

			// Every key under the prefix has a positive TTL.
			keys, err := scanPrefix(ctx, client, prefix)
			if err != nil {
				t.Fatal(err)
			}
			if len(keys) < 3 {
				t.Errorf("found %d keys under %q, want at least 3", len(keys), prefix)
			}
			for _, k := range keys {
				if d := client.PTTL(ctx, k).Val(); d <= 0 && d != -2 {
					t.Errorf("key %q has PTTL %v", k, d)
				}
			}
		})
	}
}

// scanPrefix lists the keys under prefix on every master.
func scanPrefix(ctx context.Context, client redis.UniversalClient, prefix string) ([]string, error) {
	var keys []string
	scan := func(ctx context.Context, c *redis.Client) error {
		it := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for it.Next(ctx) {
			keys = append(keys, it.Val())
		}
		return it.Err()
	}
	if cc, ok := client.(*redis.ClusterClient); ok {
		var mu = make(chan struct{}, 1)
		err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			mu <- struct{}{}
			defer func() { <-mu }()
			return scan(ctx, c)
		})
		return keys, err
	}
	return keys, scan(ctx, client.(*redis.Client))
}

func TestKeys(t *testing.T) {
	req := gcraReq("192.0.2.1", ratelimit.PerSecond(1), 1)
	if got, want := stateKey(DefaultPrefix, &req), "ratelimit:v1:{192.0.2.1}:g:test"; got != want {
		t.Errorf("stateKey = %q, want %q", got, want)
	}
	seen := map[string]string{}
	for _, k := range []string{"", "%", "}", "%7D", "%25", "{", "{}", "a}b", "a%7Db", "{a}", "}{"} {
		for _, a := range []stores.Algorithm{stores.GCRA, stores.SlidingWindow} {
			for _, rule := range []string{"", "r", "}:r", "{x}"} {
				r := stores.Request{Rule: rule, Key: k, Algorithm: a}
				sk := stateKey("p:", &r)
				if prev, dup := seen[sk]; dup {
					t.Errorf("key %q for %q collides with %s", sk, k, prev)
				}
				seen[sk] = k
				tag := hashTag(sk)
				if tag == "" || strings.Contains(tag, "}") {
					t.Errorf("key %q: hash tag %q", sk, tag)
				}
				r0 := stores.Request{Key: k}
				if slot(sk) != slot(stateKey("p:", &r0)) {
					t.Errorf("rules of key %q in different slots", k)
				}
			}
		}
	}
	if got := crc16("123456789"); got != 0x31C3 {
		t.Errorf("crc16 = %#x, want 0x31c3", got)
	}
}

// TestSlotsMatchRedis checks the client-side slot computation against
// CLUSTER KEYSLOT.
func TestSlotsMatchRedis(t *testing.T) {
	client := clusterClient(t)
	for _, k := range []string{"", "a", "192.0.2.1", "{x}", "a}b", "%", strings.Repeat("z", 300)} {
		r := stores.Request{Rule: "r", Key: k}
		sk := stateKey(DefaultPrefix, &r)
		want, err := client.ClusterKeySlot(context.Background(), sk).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got := slot(sk); int64(got) != want {
			t.Errorf("slot(%q) = %d, Redis says %d", sk, got, want)
		}
	}
}

func TestInvalidRequests(t *testing.T) {
	client := standaloneClient(t)
	s := newStore(client, WithPrefix(uniquePrefix(t)))
	ctx := context.Background()

	huge := gcraReq(strings.Repeat("k", MaxKeyLen+1), ratelimit.PerSecond(1), 1)
	if res, err := s.Take(ctx, huge); !errors.Is(err, stores.ErrInvalidRequest) || res != (stores.Result{}) {
		t.Errorf("Take of an oversized key = %+v, %v", res, err)
	}
	if err := s.Return(ctx, huge); !errors.Is(err, stores.ErrInvalidRequest) {
		t.Errorf("Return of an oversized key = %v", err)
	}
	// A key right at the bound works.
	atBound := gcraReq(strings.Repeat("k", MaxKeyLen-len("test")), ratelimit.PerSecond(1), 1)
	if res, err := s.Take(ctx, atBound); err != nil || !res.Allowed {
		t.Errorf("Take of a key at the bound = %+v, %v", res, err)
	}

	far := withAlg(gcraReq("k", ratelimit.PerDay(1), 1), stores.FixedWindow)
	far.Window = stores.Window{Start: 1<<63 - 2, End: 1<<63 - 1}
	if _, err := s.Take(ctx, far); !errors.Is(err, stores.ErrInvalidRequest) {
		t.Errorf("window beyond 2^53µs: %v", err)
	}

	reqs := make([]stores.Request, MaxBatch+1)
	for i := range reqs {
		reqs[i] = gcraReq("k", ratelimit.PerSecond(1), 0)
	}
	if err := s.TakeAll(ctx, reqs, make([]stores.Result, len(reqs))); !errors.Is(err, stores.ErrInvalidRequest) {
		t.Errorf("TakeAll of %d requests = %v", len(reqs), err)
	}
	if err := s.TakeAll(ctx, nil, nil); err != nil {
		t.Errorf("empty TakeAll = %v", err)
	}
}

// TestBackendErrors checks that failures are errors, never denials.
func TestBackendErrors(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond, DialerRetries: 1})
	defer client.Close()
	s := newStore(client)
	ctx := context.Background()
	req := gcraReq("k", ratelimit.PerSecond(1), 1)
	res, err := s.Take(ctx, req)
	if err == nil || res != (stores.Result{}) || !strings.HasPrefix(err.Error(), "ratelimit: redis: ") {
		t.Errorf("Take on a dead server = %+v, %v", res, err)
	}
	if err := s.Return(ctx, req); err == nil || !strings.HasPrefix(err.Error(), "ratelimit: redis: ") {
		t.Errorf("Return on a dead server = %v", err)
	}
	if err := s.TakeAll(ctx, []stores.Request{req}, make([]stores.Result, 1)); err == nil {
		t.Errorf("TakeAll on a dead server = nil")
	}

	live := newStore(standaloneClient(t), WithPrefix(uniquePrefix(t)))
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := live.Take(cctx, req); !errors.Is(err, context.Canceled) {
		t.Errorf("Take with a cancelled ctx = %v, want context.Canceled", err)
	}

	// A script error (the key holds another type) is an error too.
	c := standaloneClient(t)
	prefix := uniquePrefix(t)
	c.HSet(ctx, stateKey(prefix, &req), "x", "y")
	c.Expire(ctx, stateKey(prefix, &req), time.Minute)
	if res, err := newStore(c, WithPrefix(prefix)).Take(ctx, req); err == nil || res != (stores.Result{}) {
		t.Errorf("Take on a key of the wrong type = %+v, %v", res, err)
	}
}

// TestClusterTakeAllCompensation drives TakeAll across slots: all allowed,
// one shard denying, one shard failing.
func TestClusterTakeAllCompensation(t *testing.T) {
	for _, b := range backends[1:] {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			client := b.client(t)
			prefix := uniquePrefix(t)
			clock := ratelimittest.NewClock(time.Time{})
			s := newStore(client, WithPrefix(prefix), WithClock(clock))
			// Keys chosen to live in different slots and Ring shards.
			var keys []string
			for i := 0; len(keys) < 3; i++ {
				k := string(rune('a' + i))
				r := stores.Request{Key: k}
				ok := true
				for _, o := range keys {
					ro := stores.Request{Key: o}
					ok = ok && slot(stateKey(prefix, &r)) != slot(stateKey(prefix, &ro))
				}
				if ok {
					keys = append(keys, k)
				}
			}
			a := gcraReq(keys[0], ratelimit.PerHour(5), 1)
			bq := withAlg(gcraReq(keys[1], ratelimit.PerHour(1), 1), stores.FixedWindow)
			c := withAlg(gcraReq(keys[2], ratelimit.PerHour(4), 2), stores.SlidingWindow)
			reqs := []stores.Request{a, bq, c}
			res := make([]stores.Result, 3)
			if err := s.TakeAll(ctx, reqs, res); err != nil {
				t.Fatal(err)
			}
			if !res[0].Allowed || res[0].Remaining != 4 || !res[1].Allowed || res[1].Remaining != 0 || !res[2].Allowed || res[2].Remaining != 2 {
				t.Fatalf("first TakeAll: %+v", res)
			}
			// bq is now exhausted: the others are compensated.
			if err := s.TakeAll(ctx, reqs, res); err != nil {
				t.Fatal(err)
			}
			want := []stores.Result{
				{Allowed: true, Limit: a.Limit, Remaining: 4, ResetAfter: 12 * time.Minute},
				{Limit: bq.Limit, RetryAfter: time.Hour, ResetAfter: time.Hour},
				// 3 fit once the 2 taken weigh 1: half the next window.
				{Allowed: true, Limit: c.Limit, Remaining: 2, ResetAfter: 2 * time.Hour, NextAfter: 90 * time.Minute},
			}
			for i := range want {
				if res[i] != want[i] {
					t.Errorf("denied TakeAll, request %d:\n got %+v\nwant %+v", i, res[i], want[i])
				}
			}
			a.Cost, c.Cost = 0, 0
			if r := mustTake(t, s, a); r.Remaining != 4 {
				t.Errorf("a consumed by a denied TakeAll: %+v", r)
			}
			if r := mustTake(t, s, c); r.Remaining != 2 {
				t.Errorf("c consumed by a denied TakeAll: %+v", r)
			}

			// A shard failing: a, c compensated, the error returned.
			a.Cost, c.Cost = 1, 1
			d := gcraReq(keys[1], ratelimit.PerHour(1), 1)
			client.HSet(ctx, stateKey(prefix, &d), "x", "y")
			client.Expire(ctx, stateKey(prefix, &d), time.Minute)
			if err := s.TakeAll(ctx, []stores.Request{a, d, c}, res); err == nil || !strings.Contains(err.Error(), "ratelimit: redis:") {
				t.Fatalf("TakeAll with a failing shard = %v", err)
			}
			a.Cost, c.Cost = 0, 0
			if r := mustTake(t, s, a); r.Remaining != 4 {
				t.Errorf("a consumed by a failed TakeAll: %+v", r)
			}
			if r := mustTake(t, s, c); r.Remaining != 2 {
				t.Errorf("c consumed by a failed TakeAll: %+v", r)
			}
		})
	}
}
