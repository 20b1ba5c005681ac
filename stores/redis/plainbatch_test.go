package redisstore

// Coalesced plain takes: one plainScript call for a batch.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/ratelimit"
)

// scriptCalls is a go-redis hook counting EVALSHA calls by script, and the
// most keys one plainScript call carried.
type scriptCalls struct {
	plain, other, mostKeys atomic.Int64
}

func (h *scriptCalls) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *scriptCalls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if args := cmd.Args(); cmd.Name() == "evalsha" && len(args) > 2 {
			if args[1] != plainScript.Hash() {
				h.other.Add(1)
			} else if n, _ := args[2].(int); int64(n) > h.mostKeys.Load() {
				h.mostKeys.Store(int64(n))
			}
			if args[1] == plainScript.Hash() {
				h.plain.Add(1)
			}
		}
		return next(ctx, cmd)
	}
}

func (h *scriptCalls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestCoalescedPlainTakesRunThePlainScript: a batch of plain takes (here
// formed by WithCoalescing's wait) goes to Redis as one call of the plain
// script, which reads and writes each key once, not as one of the full
// script; each take's decision is exact, a key named twice in the batch
// seeing its earlier take.
func TestCoalescedPlainTakesRunThePlainScript(t *testing.T) {
	requireShared(t)
	client := redis.NewClient(&redis.Options{Addr: sharedServer.Addr})
	t.Cleanup(func() { client.Close() })
	h := &scriptCalls{}
	client.AddHook(h)
	s := New(client, WithPrefix(uniquePrefix(t)), WithoutDeniedCache(), WithCoalescing(0, 300*time.Millisecond))
	const keys, each = 4, 3 // each key: 3 takes under a limit of 2
	var wg sync.WaitGroup
	var allowed [keys]atomic.Int64
	for k := range keys {
		for range each {
			wg.Go(func() {
				res, err := s.Take(context.Background(), gcraReq(fmt.Sprint("k", k), ratelimit.PerHour(2), 1))
				if err != nil {
					t.Error(err)
					return
				}
				if res.Allowed {
					allowed[k].Add(1)
				}
			})
		}
	}
	wg.Wait()
	t.Logf("%d plain script calls, at most %d takes in one; %+v", h.plain.Load(), h.mostKeys.Load(), s.Stats())
	for k := range keys {
		if n := allowed[k].Load(); n != 2 {
			t.Errorf("key %d: %d of %d takes allowed under a limit of 2", k, n, each)
		}
	}
	if h.other.Load() != 0 || h.mostKeys.Load() < 2 {
		t.Errorf("%d calls of the full script, %d of the plain script carrying at most %d takes; want none, and a batch", h.other.Load(), h.plain.Load(), h.mostKeys.Load())
	}
}

// TestResentPlainBatchNeverAppliesTwice: in a resent batch, a take whose
// own id ("<id>/<i>" for take i > 1) is in its key replies again without
// applying, and one whose key another take wrote since is not applied
// again, even when that other take was of the same batch.
func TestResentPlainBatchNeverAppliesTwice(t *testing.T) {
	c := standaloneClient(t)
	ctx := context.Background()
	prefix := uniquePrefix(t)
	a, b := gcraReq("a", ratelimit.PerHour(3), 1), gcraReq("b", ratelimit.PerHour(3), 1)
	ka, kb := stateKey(prefix, &a), stateKey(prefix, &b)
	run := func(tok string, keys ...string) []int64 {
		t.Helper()
		args := []any{tok, "", 0, "1"}
		for range keys {
			args = append(args, gcraInterval(a.Limit), a.Limit.Capacity(), 1)
		}
		v, err := plainScript.Run(ctx, c, keys, args...).Int64Slice()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	// Takes 1 and 2 on a, take 3 on b.
	first := run("x.1", ka, ka, kb)
	if first[0] != plainAllowedAbsent || first[1] != 2 || first[5] != 1 || first[6] != 1 || first[10] != plainAllowedAbsent || first[11] != 2 {
		t.Fatalf("first send: %v", first)
	}
	sa, sb := c.Get(ctx, ka).Val(), c.Get(ctx, kb).Val()
	again := run("!x.1", ka, ka, kb)
	if c.Get(ctx, ka).Val() != sa || c.Get(ctx, kb).Val() != sb {
		t.Fatalf("the resend applied: a %q -> %q, b %q -> %q", sa, c.Get(ctx, ka).Val(), sb, c.Get(ctx, kb).Val())
	}
	// Take 1's key holds take 2's id: unknown. Take 2 and take 3 find
	// their own ids: their replies again.
	if again[0] != plainResentUnknown {
		t.Errorf("resent take 1, its key since written by take 2: %v, want %d", again[:5], plainResentUnknown)
	}
	if again[5] != 1 || again[6] != 1 || again[10] != 1 || again[11] != 2 {
		t.Errorf("resent takes 2 and 3: %v, want allowed with 1 and 2 remaining, as first sent", again[5:])
	}
}

// evalPlain loads plainScript and runs it once on keys with args, and
// returns its reply and how many times the server ran each command for it
// (INFO commandstats before and after).
func evalPlain(t *testing.T, c *redis.Client, keys []string, args []any) ([]int64, map[string]int64) {
	t.Helper()
	ctx := context.Background()
	if err := plainScript.Load(ctx, c).Err(); err != nil {
		t.Fatal(err)
	}
	var v []int64
	ran := commandsRun(t, c, func() {
		var err error
		if v, err = plainScript.EvalSha(ctx, c, keys, args...).Int64Slice(); err != nil {
			t.Fatal(err)
		}
	})
	return v, ran
}

// TestPlainBatchReadsAndWritesARepeatedKeyOnce: a hot key named by every
// take of a batch costs one GET and one SET, whatever the batch's size,
// and each take sees the ones before it (INFO commandstats on a private
// server).
func TestPlainBatchReadsAndWritesARepeatedKeyOnce(t *testing.T) {
	requireRedis(t)
	srv := startTestRedis(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { c.Close() })
	ctx := context.Background()
	req := gcraReq("hot", ratelimit.PerHour(3), 1)
	key := stateKey(uniquePrefix(t), &req)
	const n = 5
	keys, args := make([]string, n), []any{"x.1", "", 0, "1"}
	for i := range keys {
		keys[i] = key
		args = append(args, gcraInterval(req.Limit), req.Limit.Capacity(), 1)
	}
	v, ran := evalPlain(t, c, keys, args)
	for i, want := range []int64{plainAllowedAbsent, 1, 1, 0, 0} {
		if v[takeWidth*i] != want {
			t.Errorf("take %d of %d on one key under 3/hour: allowed=%d, want %d (%v)", i+1, n, v[takeWidth*i], want, v)
		}
	}
	if g, s := ran["get"], ran["set"]; g != 1 || s != 1 {
		t.Errorf("%d takes of one key: %d GET and %d SET, want 1 and 1", n, g, s)
	}
	if state := c.Get(ctx, key).Val(); !strings.HasSuffix(state, ":x.1/3") {
		t.Errorf("state %q, want the id of take 3, the last applied", state)
	}
}

// TestPlainBatchOfAbsentKeysSetsEachWithoutGet: on Redis 7 or later, a
// batch of takes of distinct keys that hold no state costs one SET (NX GET)
// per key and no GET, each take allowed with its state and TTL written
// (INFO commandstats on a private server).
func TestPlainBatchOfAbsentKeysSetsEachWithoutGet(t *testing.T) {
	c := redis7Client(t)
	ctx := context.Background()
	prefix := uniquePrefix(t)
	const n = 5
	keys, args := make([]string, n), []any{"x.1", "", 0, "1"}
	for i := range keys {
		req := gcraReq(fmt.Sprint("k", i), ratelimit.PerHour(3), 1)
		keys[i] = stateKey(prefix, &req)
		args = append(args, gcraInterval(req.Limit), req.Limit.Capacity(), 1)
	}
	v, ran := evalPlain(t, c, keys, args)
	for i := range n {
		if v[takeWidth*i] != plainAllowedAbsent || v[takeWidth*i+1] != 2 {
			t.Errorf("take %d of a new key under 3/hour: %v, want allowed on a key without state (%d) with 2 remaining", i+1, v[takeWidth*i:takeWidth*(i+1)], plainAllowedAbsent)
		}
		if ttl := c.PTTL(ctx, keys[i]).Val(); ttl <= 0 || ttl > 20*time.Minute {
			t.Errorf("key %d: TTL %v, want the 20 minutes one unit takes to refill", i+1, ttl)
		}
	}
	if g, s := ran["get"], ran["set"]; g != 0 || s != n {
		t.Errorf("%d takes of new keys: %d GET and %d SET, want 0 and %d", n, g, s, n)
	}
}
