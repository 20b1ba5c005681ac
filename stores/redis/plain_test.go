package redisstore

// The plain GCRA take (plain.lua): what it costs the server, and that a
// resent take is never applied twice.

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/stores"
)

// commandCalls returns INFO commandstats' calls by command.
func commandCalls(t *testing.T, c *redis.Client) map[string]int64 {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]int64{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		for _, f := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(f, "calls="); ok {
				calls[strings.TrimPrefix(name, "cmdstat_")], _ = strconv.ParseInt(v, 10, 64)
			}
		}
	}
	return calls
}

// commandsRun runs f and returns how many times the server ran each
// command meanwhile (INFO commandstats before and after, INFO itself left
// out).
func commandsRun(t *testing.T, c *redis.Client, f func()) map[string]int64 {
	t.Helper()
	before := commandCalls(t, c)
	f()
	ran := commandCalls(t, c)
	for cmd := range ran {
		ran[cmd] -= before[cmd]
	}
	delete(ran, "info")
	return ran
}

// TestPlainTakeCostsThreeCommands: with the server's time and a client that
// resends (go-redis's default MaxRetries), a plain GCRA take runs one
// EVALSHA, and inside it TIME, one GET and one SET of its own key: no call
// key. Counted by INFO commandstats on a private server.
func TestPlainTakeCostsThreeCommands(t *testing.T) {
	requireRedis(t)
	srv := startTestRedis(t)
	for _, coalesce := range []bool{true, false} {
		t.Run(fmt.Sprintf("coalescing=%v", coalesce), func(t *testing.T) {
			client := redis.NewClient(&redis.Options{Addr: srv.Addr})
			t.Cleanup(func() { client.Close() })
			opts := []Option{WithPrefix(uniquePrefix(t)), WithoutDeniedCache()}
			if !coalesce {
				opts = append(opts, WithoutCoalescing())
			}
			s := New(client, opts...)
			mustTake(t, s, gcraReq("warm", ratelimit.PerHour(10), 1)) // loads the script
			const n = 50
			ran := commandsRun(t, client, func() {
				for i := range n {
					if res := mustTake(t, s, gcraReq("k"+strconv.Itoa(i), ratelimit.PerHour(10), 1)); !res.Allowed {
						t.Fatalf("take %d denied: %+v", i, res)
					}
				}
			})
			var inner int64
			for cmd, d := range ran {
				switch cmd {
				case "evalsha":
					if d != n {
						t.Errorf("%d EVALSHA for %d takes", d, n)
					}
				default:
					inner += d
					if d != 0 {
						t.Logf("%s: %d", cmd, d)
					}
				}
			}
			if inner > 3*n {
				t.Errorf("%d commands inside the script for %d plain takes, want at most %d (TIME, GET, SET)", inner, n, 3*n)
			}
		})
	}
}

// redis7Client is a client of a private redis-server of version 7 or
// later (where SET takes NX and GET together); the test is skipped on an
// older one.
func redis7Client(t *testing.T) *redis.Client {
	t.Helper()
	requireRedis(t)
	srv := startTestRedis(t)
	if major, _, _ := strings.Cut(srv.Version, "."); atoi(major) < 7 {
		t.Skipf("redis %s: SET NX GET needs Redis 7", srv.Version)
	}
	client := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { client.Close() })
	return client
}

// TestPlainTakeOfAbsentKeyCostsThreeCommandsInAll: on Redis 7 or later,
// a plain take of a key that holds no state (the first check of a key, or
// one whose state expired) runs three commands in all: EVALSHA, and inside
// it TIME and one SET that writes the key only if it is absent and replies
// what it held (SET NX GET), no separate GET. Counted by INFO commandstats
// on a private server, with the server's time and a client that resends.
func TestPlainTakeOfAbsentKeyCostsThreeCommandsInAll(t *testing.T) {
	client := redis7Client(t)
	s := New(client, WithPrefix(uniquePrefix(t)), WithoutDeniedCache(), WithoutCoalescing())
	mustTake(t, s, gcraReq("warm", ratelimit.PerHour(10), 1)) // loads the script
	const n = 50
	ran := commandsRun(t, client, func() {
		for i := range n {
			if res := mustTake(t, s, gcraReq("k"+strconv.Itoa(i), ratelimit.PerHour(10), 1)); !res.Allowed || res.Remaining != 9 {
				t.Fatalf("take %d of a new key: %+v, want allowed with 9 remaining", i, res)
			}
		}
	})
	var all int64
	for cmd, d := range ran {
		if d != 0 {
			all += d
			t.Logf("%s: %d", cmd, d)
		}
	}
	if all != 3*n {
		t.Errorf("%d commands for %d plain takes of absent keys, want %d (EVALSHA, TIME, SET NX GET each)", all, n, 3*n)
	}
}

// TestPlainTakesOfHeldKeysReadBeforeWriting: on Redis 7 or later, once a
// plain take found its key holding state, the Store's next takes read with
// GET rather than trying SET NX GET (which writes nothing on such a key
// and costs the server more): a denied key's checks cost EVALSHA, TIME and
// one GET, no SET. Once a take finds its key without state again, the
// next ones try SET NX GET again: new keys cost one SET each, no GET, but
// the first. Counted by INFO commandstats on a private server.
func TestPlainTakesOfHeldKeysReadBeforeWriting(t *testing.T) {
	client := redis7Client(t)
	s := New(client, WithPrefix(uniquePrefix(t)), WithoutDeniedCache(), WithoutCoalescing())
	denied := gcraReq("denied", ratelimit.PerHour(1), 1)
	mustTake(t, s, denied) // loads the script, and uses the key's one unit
	mustTake(t, s, denied) // denied: the Store learns that keys hold state
	count := func(f func()) (gets, sets int64) {
		ran := commandsRun(t, client, f)
		return ran["get"], ran["set"]
	}
	const n = 20
	gets, sets := count(func() {
		for i := range n {
			if res := mustTake(t, s, denied); res.Allowed {
				t.Fatalf("check %d of an exhausted key allowed: %+v", i, res)
			}
		}
	})
	if gets != n || sets != 0 {
		t.Errorf("%d checks of a denied key: %d GET and %d SET, want %d and 0", n, gets, sets, n)
	}
	gets, sets = count(func() {
		for i := range n {
			if res := mustTake(t, s, gcraReq("new"+strconv.Itoa(i), ratelimit.PerHour(1), 1)); !res.Allowed {
				t.Fatalf("take of new key %d denied: %+v", i, res)
			}
		}
	})
	if gets != 1 || sets != n {
		t.Errorf("%d takes of new keys after denials: %d GET and %d SET, want 1 (the first take's) and %d", n, gets, sets, n)
	}
}

// atoi is strconv.Atoi's value, 0 when s is no number.
func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

// plainRun calls plainScript by hand as a client would send it, with the
// call token tok, and returns its reply.
func plainRun(t *testing.T, c redis.UniversalClient, key, tok string, req stores.Request) []int64 {
	t.Helper()
	v, err := plainScript.Run(context.Background(), c, []string{key}, tok, "", 0, "1",
		gcraInterval(req.Limit), req.Limit.Capacity(), req.Cost).Int64Slice()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestResentPlainTakeNeverAppliesTwice: a take resent after its reply was
// lost ("!" before its id) replies again, without applying, when its own id
// is in the key; when another call wrote the key since, it is not applied
// again: denied if it would be denied anyway, and otherwise refused (-2,
// an error for the caller, whose failure policy answers).
func TestResentPlainTakeNeverAppliesTwice(t *testing.T) {
	c := standaloneClient(t)
	ctx := context.Background()
	req := gcraReq("resent", ratelimit.PerHour(3), 1)
	key := stateKey(uniquePrefix(t), &req)
	get := func() string { return c.Get(ctx, key).Val() }

	if v := plainRun(t, c, key, "a.1", req); v[0] != plainAllowedAbsent || v[1] != 2 {
		t.Fatalf("first take: %v, want allowed on a key without state (%d) with 2 remaining", v, plainAllowedAbsent)
	}
	state := get()
	if !strings.HasSuffix(state, ":a.1") {
		t.Fatalf("state %q does not name the call that wrote it", state)
	}
	if v := plainRun(t, c, key, "!a.1", req); v[0] != 1 || v[1] != 2 || get() != state {
		t.Errorf("resent take whose id the key holds: %v, state %q -> %q; want its reply again (allowed, 2 remaining) and nothing applied", v, state, get())
	}

	if v := plainRun(t, c, key, "b.1", req); v[0] != 1 || v[1] != 1 {
		t.Fatalf("another call's take: %v, want allowed with 1 remaining", v)
	}
	state = get()
	if v := plainRun(t, c, key, "!a.2", req); v[0] != plainResentUnknown || get() != state {
		t.Errorf("resent take after another call wrote the key: %v, state %q -> %q; want %d and nothing applied", v, state, get(), plainResentUnknown)
	}

	plainRun(t, c, key, "b.2", req) // the last unit
	state = get()
	if v := plainRun(t, c, key, "!a.3", req); v[0] != 0 || get() != state {
		t.Errorf("resent take that does not fit: %v, state %q -> %q; want denied, nothing applied", v, state, get())
	}
	if ttl := c.PTTL(ctx, key).Val(); ttl <= 0 || ttl > time.Hour {
		t.Errorf("state TTL %v, want within the hour it takes to refill", ttl)
	}
}

// TestPlainTakeBudgetAllocatesNoContext: on a client that bounds its
// reads by ctx (ContextTimeoutEnabled), a plain take keeps its budget with
// the callContext pooled in its call, not a context.WithDeadline of its
// own (a context, a timer and its cancel func on every check): it
// allocates no more than the store's own key and result, beyond what
// go-redis allocates for the same EVALSHA sent with the caller's ctx.
func TestPlainTakeBudgetAllocatesNoContext(t *testing.T) {
	requireShared(t)
	client := redis.NewClient(&redis.Options{Addr: sharedServer.Addr, ContextTimeoutEnabled: true, PoolSize: 1})
	t.Cleanup(func() { client.Close() })
	prefix := uniquePrefix(t)
	s := New(client, WithPrefix(prefix), WithoutCoalescing(), WithoutDeniedCache())
	ctx := context.Background()
	req := gcraReq("k", ratelimit.PerSecond(1_000_000), 1)
	mustTake(t, s, req)
	take := testing.AllocsPerRun(200, func() {
		if _, err := s.Take(ctx, req); err != nil {
			t.Fatal(err)
		}
	})
	key := stateKey(prefix, &req)
	tok := &callToken{}
	slack, tt, capacity, cost := int64(0), gcraInterval(req.Limit), int64(req.Limit.Capacity()), int64(1)
	raw := testing.AllocsPerRun(200, func() {
		if err := plainScript.EvalSha(ctx, client, []string{key}, tok, "", &slack, "1", &tt, &capacity, &cost).Err(); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("Take: %.1f allocations; its EVALSHA alone: %.1f", take, raw)
	if take > raw+2 {
		t.Errorf("a plain Take allocates %.1f times, its EVALSHA alone %.1f: the Store adds %.1f, want at most 2 (the key and the limit's result)", take, raw, take-raw)
	}
}

// TestPlainTakeOfNewKeysAllocatesAsOfAHeldKey: a plain take of keys that
// hold no state (sent with the SET NX GET hint) allocates no more than one
// of a key that holds state: the hint's argument is boxed once, not on
// every call.
func TestPlainTakeOfNewKeysAllocatesAsOfAHeldKey(t *testing.T) {
	requireShared(t)
	client := redis.NewClient(&redis.Options{Addr: sharedServer.Addr, ContextTimeoutEnabled: true, PoolSize: 1})
	t.Cleanup(func() { client.Close() })
	ctx := context.Background()
	take := func(s *Store, req stores.Request) {
		if _, err := s.Take(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	held := New(client, WithPrefix(uniquePrefix(t)), WithoutCoalescing(), WithoutDeniedCache())
	hot := gcraReq("hot", ratelimit.PerHour(1_000_000), 1) // holds state for an hour
	take(held, hot)
	onHeld := testing.AllocsPerRun(200, func() { take(held, hot) })

	fresh := New(client, WithPrefix(uniquePrefix(t)), WithoutCoalescing(), WithoutDeniedCache())
	reqs := make([]stores.Request, 202)
	for i := range reqs {
		reqs[i] = gcraReq("k"+strconv.Itoa(i), ratelimit.PerHour(1_000_000), 1)
	}
	next := 0
	onNew := testing.AllocsPerRun(200, func() { take(fresh, reqs[next]); next++ })
	t.Logf("Take of a held key: %.1f allocations; of new keys: %.1f", onHeld, onNew)
	if onNew > onHeld {
		t.Errorf("a plain Take of new keys allocates %.1f times, of a held key %.1f: want no more", onNew, onHeld)
	}
}
