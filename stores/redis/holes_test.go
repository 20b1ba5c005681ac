package redisstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores"
	"github.com/sluicehq/ratelimit/stores/memory"
)

// GCRA holes (script.lua, Holes): a reservation given back with its token
// while later ones wait leaves its turn empty, and the key's time moves
// back through it once the later ones are given back.

// heldTake is a GCRA take of cost units whose tokens are mem and redis.
type heldTake struct {
	cost       int
	mem, redis uint64
}

// maxHeld bounds an entry's held takes: the oldest are forgotten (they
// stay consumed, as a caller's that never gives them back).
const maxHeld = 24

// TestHolesMatchMemory runs a queue of reservations on one GCRA key, given
// back in random order with their tokens (and sometimes without), among
// plain takes, against the memory store, on every path a refund takes: a
// coalesced batch and a call of its own (script mode "i"), and on Cluster
// a TakeAll's compensation (mode "r"). Every Result must match,
// and the run must have made holes and gone back through them.
func TestHolesMatchMemory(t *testing.T) {
	for _, b := range backends[:2] {
		for _, coalesce := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/coalesce=%v", b.name, coalesce), func(t *testing.T) {
				client := b.client(t)
				clock := ratelimittest.NewClock(ratelimittest.Epoch())
				opts := []Option{WithClock(clock), WithPrefix(uniquePrefix(t))}
				if !coalesce {
					opts = append(opts, WithoutCoalescing())
				}
				runHoles(t, client, newStore(client, opts...), memory.New(memory.WithClock(clock)), clock, b.name == "cluster")
			})
		}
	}
}

func runHoles(t *testing.T, client redis.UniversalClient, rs *Store, mem stores.Store, clock *ratelimittest.Clock, cluster bool) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 19))
	req := paced(gcraReq("queue", ratelimit.PerSecond(50).WithBurst(3), 1), time.Second) // one per 20ms
	hk := holesKey(stateKey(rs.prefix, &req))
	var out []heldTake
	var made, through, lastHoles int64
	var log []string
	defer func() {
		if t.Failed() {
			for _, l := range log[max(0, len(log)-30):] {
				t.Log(l)
			}
		}
	}()
	for op := range 3000 {
		switch rng.IntN(200) {
		case 0: // every reservation acts: the next refund settles the holes
			clock.Advance(1100 * time.Millisecond)
		case 1, 2, 3, 4, 5, 6, 7, 8, 9, 10:
			// the takes held are served: never given back
			out = out[:0]
		}
		if rng.IntN(4) == 0 {
			clock.Advance(time.Duration(rng.IntN(30)) * time.Millisecond)
		}
		what := "take"
		switch k := rng.IntN(10); {
		case k < 5 || len(out) == 0:
			r := withCost(req, 1+rng.IntN(2))
			if rng.IntN(5) == 0 {
				r.MaxDelay = 0
			}
			want, got := mustTake(t, mem, r), mustTake(t, rs, r)
			if !sameResult(&entry{req: r, exact: true}, r.Force, got, want) {
				t.Fatalf("op %d: Take cost %d max delay %v:\n redis  %+v\n memory %+v", op, r.Cost, r.MaxDelay, got, want)
			}
			if want.Allowed {
				out = append(out, heldTake{r.Cost, want.Slot, got.Slot})
			}
			what = fmt.Sprintf("take cost %d max delay %v: %+v", r.Cost, r.MaxDelay, want)
		case k < 9:
			i := rng.IntN(len(out))
			h := out[i]
			out = append(out[:i], out[i+1:]...)
			mr, rr := withCost(req, h.cost), withCost(req, h.cost)
			if rng.IntN(8) > 0 {
				mr.Slot, rr.Slot = h.mem, h.redis
			}
			if err := mem.Return(ctx, mr); err != nil {
				t.Fatal(err)
			}
			what = fmt.Sprintf("return cost %d slot %d of %d held, tat %v", h.cost, mr.Slot, len(out)+1, mustTake(t, mem, withCost(req, 0)).ResetAfter)
			if cluster && rng.IntN(2) == 0 {
				what += " (compensation)"
				compensated(rs, rr)
			} else if err := rs.Return(ctx, rr); err != nil {
				t.Fatal(err)
			}
		default:
			want, got := mustTake(t, mem, withCost(req, 0)), mustTake(t, rs, withCost(req, 0))
			if !sameResult(&entry{req: req, exact: true}, req.Force, got, want) {
				t.Fatalf("op %d: peek:\n redis  %+v\n memory %+v", op, got, want)
			}
		}
		log = append(log, fmt.Sprintf("op %d +%v %s", op, clock.Now().Sub(ratelimittest.Epoch()), what))
		n, err := client.HLen(ctx, hk).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n > lastHoles {
			made += n - lastHoles
		} else if n < lastHoles {
			through += lastHoles - n
		}
		lastHoles = n
	}
	t.Logf("%d holes made, %d gone through or settled", made, through)
	if made < 50 || through < 50 {
		t.Fatalf("%d holes made, %d gone through: the run did not exercise holes", made, through)
	}
}

// compensated gives r back as a TakeAll across Cluster slots gives back
// the takes of its slots when another slot denied: in one script call of
// mode "r", with the takes' tokens. It drops the key's cached denial, as
// Return does.
func compensated(rs *Store, r stores.Request) {
	if rs.denied != nil {
		rs.denied.forget(&r)
	}
	k := stateKey(rs.prefix, &r)
	rs.compensate(context.Background(), rs.now(), [][]int{{0}}, []string{k}, []stores.Request{r}, func(int) bool { return true })
}

// holesQueue makes three reservations of one unit on a fresh key of s and
// gives the second back with its token: a hole, the third still waiting.
func holesQueue(t *testing.T, s *Store) (req stores.Request, hk string, third stores.Result) {
	t.Helper()
	req = paced(gcraReq("bounded", ratelimit.PerSecond(10).WithBurst(1), 1), time.Second)
	mustTake(t, s, req)
	second := mustTake(t, s, req)
	third = mustTake(t, s, req)
	ret := req
	ret.Slot = second.Slot
	if err := s.Return(context.Background(), ret); err != nil {
		t.Fatal(err)
	}
	return req, holesKey(stateKey(s.prefix, &req)), third
}

// TestHolesBoundedPerKey: a key holds at most 4096 holes. Beyond them a
// refund is lost (the key's time stays: it only denies more), unless
// holes whose turns have passed make room; and the holes live at least as
// long as the key.
func TestHolesBoundedPerKey(t *testing.T) {
	ctx := context.Background()
	client := standaloneClient(t)
	clock := ratelimittest.NewClock(ratelimittest.Epoch())
	s := newStore(client, WithClock(clock), WithPrefix(uniquePrefix(t)))
	req, hk, third := holesQueue(t, s)
	k := stateKey(s.prefix, &req)
	if n := client.HLen(ctx, hk).Val(); n != 1 {
		t.Fatalf("%d holes after a middle refund, want 1", n)
	}
	// The holes' TTL first: read later, the key's can only be shorter.
	if ht, kt := client.PTTL(ctx, hk).Val(), client.PTTL(ctx, k).Val(); ht < kt {
		t.Fatalf("the holes expire in %v, before their key (%v)", ht, kt)
	}
	// Fill the key's holes up to the bound with turns still to come.
	base := third.Slot + 1_000_000
	fill := func(base uint64) {
		client.Del(ctx, hk)
		var args []any
		for i := range 4096 {
			args = append(args, base+uint64(i), 1)
		}
		client.HSet(ctx, hk, args...)
	}
	fill(base)
	before := mustTake(t, s, withCost(req, 0))
	fourth := mustTake(t, s, req)
	mustTake(t, s, req) // a fifth behind it: the fourth is not the latest
	ret := req
	ret.Slot = fourth.Slot
	if err := s.Return(ctx, ret); err != nil {
		t.Fatal(err)
	}
	if n := client.HLen(ctx, hk).Val(); n != 4096 {
		t.Fatalf("%d holes after a refund at the bound, want 4096", n)
	}
	if got := mustTake(t, s, withCost(req, 0)); got.ResetAfter != before.ResetAfter+2*100*time.Millisecond {
		t.Fatalf("after a lost refund: %+v; want the key's time of two takes after %+v", got, before)
	}
	// Turns that passed make room: they are dropped, and the hole recorded.
	fill(uint64(ratelimittest.Epoch().UnixMicro()) - 5000)
	sixth := mustTake(t, s, req)
	mustTake(t, s, req)
	ret.Slot = sixth.Slot
	if err := s.Return(ctx, ret); err != nil {
		t.Fatal(err)
	}
	if n := client.HLen(ctx, hk).Val(); n != 1 {
		t.Fatalf("%d holes after a refund with 4096 passed turns, want 1", n)
	}
}

// TestResetDropsHoles: Reset of a GCRA key deletes its holes too, so that
// a later refund never moves the fresh key's time through an old turn.
func TestResetDropsHoles(t *testing.T) {
	ctx := context.Background()
	client := standaloneClient(t)
	s := newStore(client, WithClock(ratelimittest.NewClock(ratelimittest.Epoch())), WithPrefix(uniquePrefix(t)))
	req, hk, _ := holesQueue(t, s)
	if client.Exists(ctx, hk).Val() != 1 {
		t.Fatal("no holes after a middle refund")
	}
	if err := s.Reset(ctx, req.Rule, req.Key, req.Algorithm); err != nil {
		t.Fatal(err)
	}
	if n := client.Exists(ctx, hk, stateKey(s.prefix, &req)).Val(); n != 0 {
		t.Fatalf("%d of the key and its holes left after Reset", n)
	}
}

// TestLeaseTakesCarryTokens: a take served from a lease carries the key's
// time after the grant as its token, and its refund with that token while
// no reservation waits is exact, as a plain take's.
func TestLeaseTakesCarryTokens(t *testing.T) {
	clock := ratelimittest.NewClock(ratelimittest.Epoch())
	s := newStore(standaloneClient(t), WithClock(clock), WithPrefix(uniquePrefix(t)), WithLease(0.5, time.Minute))
	other := newStore(standaloneClient(t), WithClock(clock), WithPrefix(s.prefix), WithoutCoalescing())
	req := gcraReq("k", ratelimit.PerSecond(10), 1) // capacity 10, leases of 5
	first := mustTake(t, s, req)
	second := mustTake(t, s, req)
	if s.Stats().LeaseHits != 1 || first.Slot == 0 || second.Slot != first.Slot {
		t.Fatalf("grant %+v, lease hit %+v (stats %+v): want one token, the grant's", first, second, s.Stats())
	}
	if got := mustTake(t, other, withCost(req, 0)).Remaining; got != 5 {
		t.Fatalf("Redis holds %d units after a lease of 5, want 5", got)
	}
	ret := req
	ret.Slot = second.Slot
	if err := s.Return(context.Background(), ret); err != nil {
		t.Fatal(err)
	}
	if got := mustTake(t, other, withCost(req, 0)).Remaining; got != 6 {
		t.Fatalf("Redis holds %d units after a refund with the lease's token, want 6", got)
	}
}
