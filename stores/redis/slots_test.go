package redisstore

// Concurrency slots: each expires on its own Period after it was taken,
// and Result.Slot names the slots of one acquisition for its Return.

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores"
)

func slotReq(key string, rate int, period time.Duration, cost int) stores.Request {
	return withAlg(gcraReq(key, stores.Limit{Rate: rate, Period: period}, cost), stores.Concurrency)
}

// inUse returns how many slots of req's key are taken, by a cost-0 peek.
func inUse(t *testing.T, s *Store, req stores.Request) int {
	t.Helper()
	req.Cost = 0
	res, err := s.Take(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return req.Limit.Rate - res.Remaining
}

// TestLostSlotExpiresWhileTrafficContinues: a slot lost by an acquisition
// whose reply came after its budget (the script ran), or by a release that
// failed, is free again one Period after it was taken, while other callers
// keep acquiring and releasing slots of the same key.
func TestLostSlotExpiresWhileTrafficContinues(t *testing.T) {
	for _, how := range []string{"timed-out acquisition", "failed release"} {
		t.Run(how, func(t *testing.T) {
			requireShared(t)
			proxy := startProxy(t, sharedServer.Addr)
			clock := ratelimittest.NewClock(ratelimittest.Epoch())
			prefix := uniquePrefix(t)
			viaProxy := newStore(faultClient(proxy.Addr()), WithPrefix(prefix), WithClock(clock))
			direct := newStore(standaloneClient(t), WithPrefix(prefix), WithClock(clock))
			req := slotReq("k", 2, 10*time.Second, 1)

			// A warm connection, and the script cached: what is held below is
			// the acquisition's reply, not a handshake.
			mustTake(t, viaProxy, slotReq("warm", 2, time.Second, 0))
			if how == "timed-out acquisition" {
				proxy.Hold() // the script runs; its reply waits
				ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
				_, err := viaProxy.Take(ctx, req)
				cancel()
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("held acquisition: %v, want a deadline error", err)
				}
				// Wait for the script to have run (an event, not a time).
				for deadline := time.Now().Add(10 * time.Second); inUse(t, direct, req) != 1; {
					if time.Now().After(deadline) {
						t.Fatal("the timed-out acquisition never reached Redis")
					}
					time.Sleep(time.Millisecond) // polling Redis for the event
				}
				proxy.Release()
			} else {
				if res := mustTake(t, direct, req); !res.Allowed {
					t.Fatal(res)
				}
				proxy.SetSilent(true)
				ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
				err := viaProxy.Return(ctx, req)
				cancel()
				if err == nil {
					t.Fatal("Return through a silent proxy succeeded")
				}
			}
			if n := inUse(t, direct, req); n != 1 {
				t.Fatalf("%d slots in use after the loss, want 1", n)
			}

			// Traffic: every second one caller takes a slot and gives it back.
			for step := 1; step <= 15; step++ {
				clock.Advance(time.Second)
				res := mustTake(t, direct, req)
				if !res.Allowed {
					t.Fatalf("step %d: %+v", step, res)
				}
				ret := req
				ret.Slot = res.Slot
				if err := direct.Return(context.Background(), ret); err != nil {
					t.Fatal(err)
				}
				if want := map[bool]int{true: 1, false: 0}[step < 10]; inUse(t, direct, req) != want {
					t.Fatalf("%v after the loss: %d slots in use, want %d", time.Duration(step)*time.Second, inUse(t, direct, req), want)
				}
			}
			a, b := mustTake(t, direct, req), mustTake(t, direct, req)
			if !a.Allowed || !b.Allowed {
				t.Errorf("both slots should be free: %+v %+v", a, b)
			}
		})
	}
}

// TestSlotTokensReleaseExactlyTheirSlots: each allowed acquisition gets
// its own token; a Return with it releases exactly its slots, and nothing
// once they expired (never a later acquisition's); a Return without one
// releases the slots that expire soonest.
func TestSlotTokensReleaseExactlyTheirSlots(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			clock := ratelimittest.NewClock(ratelimittest.Epoch())
			s := newStore(b.client(t), WithPrefix(uniquePrefix(t)), WithClock(clock))
			req := slotReq("k", 5, 10*time.Second, 2)
			a := mustTake(t, s, req)
			clock.Advance(time.Second)
			req.Cost = 1
			c := mustTake(t, s, req)
			if !a.Allowed || !c.Allowed || a.Slot == 0 || c.Slot == 0 || a.Slot == c.Slot {
				t.Fatalf("acquisitions %+v and %+v: want allowed, with distinct non-zero tokens", a, c)
			}
			if c.RetryAfter != 0 {
				t.Errorf("allowed acquisition with RetryAfter %v", c.RetryAfter)
			}
			if d := mustTake(t, s, slotReq("k", 5, 10*time.Second, 0)); d.Slot != 0 {
				t.Errorf("a cost-0 peek got token %d", d.Slot)
			}
			// Release the second acquisition by its token: the first's two
			// slots stay.
			ret := req
			ret.Slot = c.Slot
			if err := s.Return(context.Background(), ret); err != nil {
				t.Fatal(err)
			}
			if n := inUse(t, s, req); n != 2 {
				t.Fatalf("%d in use after returning the 1-slot acquisition, want 2", n)
			}
			// Its token again: nothing more is released.
			if err := s.Return(context.Background(), ret); err != nil {
				t.Fatal(err)
			}
			if n := inUse(t, s, req); n != 2 {
				t.Fatalf("%d in use after returning a token twice, want 2", n)
			}
			// The first acquisition expires; a new one is made; the first's
			// late Return must not release it.
			clock.Advance(10 * time.Second)
			e := mustTake(t, s, req)
			ret.Cost, ret.Slot = 2, a.Slot
			if err := s.Return(context.Background(), ret); err != nil {
				t.Fatal(err)
			}
			if n := inUse(t, s, req); n != 1 {
				t.Fatalf("%d in use after a late Return of expired slots, want 1 (token %d, new %d)", n, a.Slot, e.Slot)
			}
			// Slot 0 releases the soonest to expire: take another later, release
			// one without a token, then the later one is the one left.
			clock.Advance(time.Second)
			f := mustTake(t, s, req)
			ret.Cost, ret.Slot = 1, 0
			if err := s.Return(context.Background(), ret); err != nil {
				t.Fatal(err)
			}
			clock.Advance(9*time.Second + time.Millisecond) // e has expired by now, f has not
			if n := inUse(t, s, req); n != 1 {
				t.Fatalf("%d in use: Return without a token did not release the soonest to expire", n)
			}
			ret.Slot = f.Slot
			if err := s.Return(context.Background(), ret); err != nil {
				t.Fatal(err)
			}
			if n := inUse(t, s, req); n != 0 {
				t.Fatalf("%d in use after returning every slot", n)
			}
		})
	}
}

// TestSlotTokensCoalescedAndTakeAll: 64 callers on four Stores acquire and
// release by token through coalesced batches and TakeAll; in-flight never
// exceeds the limit and every slot is released exactly: none is left.
func TestSlotTokensCoalescedAndTakeAll(t *testing.T) {
	for _, b := range backends[:2] {
		t.Run(b.name, func(t *testing.T) {
			prefix := uniquePrefix(t)
			peers := make([]*Store, 4)
			for i := range peers {
				peers[i] = newStore(b.client(t), WithPrefix(prefix))
			}
			req := slotReq("hot", 8, time.Hour, 1)
			other := gcraReq("hot", ratelimit.PerHour(1_000_000), 1) // same slot: one script
			var mu sync.Mutex
			held := map[uint64]bool{}
			var wg sync.WaitGroup
			for g := range 64 {
				s := peers[g%4]
				wg.Go(func() {
					for i := range 10 {
						var res stores.Result
						var err error
						if i%2 == 0 {
							res, err = s.Take(context.Background(), req)
						} else {
							out := make([]stores.Result, 2)
							err = s.TakeAll(context.Background(), []stores.Request{other, req}, out)
							res = out[1]
						}
						if err != nil {
							t.Error(err)
							return
						}
						if !res.Allowed {
							continue
						}
						mu.Lock()
						if held[res.Slot] || res.Slot == 0 {
							t.Errorf("token %d given twice (or zero)", res.Slot)
						}
						held[res.Slot] = true
						if len(held) > req.Limit.Rate {
							t.Errorf("%d slots held, limit %d", len(held), req.Limit.Rate)
						}
						mu.Unlock()
						ret := req
						ret.Slot = res.Slot
						mu.Lock()
						delete(held, res.Slot)
						mu.Unlock()
						if err := s.Return(context.Background(), ret); err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			if n := inUse(t, peers[0], req); n != 0 {
				t.Errorf("%d slots left in use after every holder returned its token", n)
			}
		})
	}
}

// TestConcurrencyKeyTTLFollowsLatestSlot: the sorted set of slots lives as
// long as its latest slot, so an abandoned key disappears.
func TestConcurrencyKeyTTLFollowsLatestSlot(t *testing.T) {
	client := standaloneClient(t)
	prefix := uniquePrefix(t)
	s := newStore(client, WithPrefix(prefix))
	req := slotReq("ttl", 3, 2*time.Second, 1)
	mustTake(t, s, req)
	ttl, err := client.PTTL(context.Background(), stateKey(prefix, &req)).Result()
	if err != nil {
		t.Fatal(err)
	}
	if ttl <= 0 || ttl > 2*time.Second {
		t.Errorf("PTTL %v, want within the 2s period", ttl)
	}
	if typ := client.Type(context.Background(), stateKey(prefix, &req)).Val(); typ != "zset" {
		t.Errorf("concurrency state is a %s, want a zset", typ)
	}
}
