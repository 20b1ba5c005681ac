package redisstore

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/stores"
)

// redirectCounter is a go-redis hook on every node client of a
// ClusterClient that counts the MOVED and TRYAGAIN replies the client
// handled. (An ASK reply is followed inside the ClusterClient without
// reaching these hooks in the runs measured; it shows in the errors.)
type redirectCounter struct{ moved, tryagain atomic.Int64 }

func (h *redirectCounter) count(err error) {
	if err == nil {
		return
	}
	switch s := err.Error(); {
	case strings.HasPrefix(s, "MOVED "):
		h.moved.Add(1)
	case strings.HasPrefix(s, "TRYAGAIN"):
		h.tryagain.Add(1)
	}
}

func (h *redirectCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *redirectCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.count(cmd.Err())
		return err
	}
}

func (h *redirectCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, c := range cmds {
			h.count(c.Err())
		}
		return err
	}
}

// hotSlot sends one request through r and returns the hash tag of the
// state key it created, its slot and the node that holds it.
func hotSlot(t *testing.T, r *foRig, ip string) (tag string, slot int64, owner string) {
	t.Helper()
	rep := r.serve(ip)
	for try := 0; rep.by != byRedis && try < 50; try++ {
		rep = r.serve(ip)
	}
	for _, a := range sharedCluster.Addrs() {
		c := redis.NewClient(&redis.Options{Addr: a})
		keys, _, err := c.Scan(context.Background(), 0, r.prefix+"*", 1000).Result()
		if err == nil && len(keys) > 0 {
			k := keys[0]
			tag = k[strings.IndexByte(k, '{')+1 : strings.IndexByte(k, '}')]
			slot, err = c.ClusterKeySlot(context.Background(), k).Result()
			c.Close()
			if err != nil {
				t.Fatal(err)
			}
			return tag, slot, a
		}
		c.Close()
	}
	t.Fatalf("no state key for %s on any node", ip)
	return
}

// moveSlot moves slot from src to dst as redis-cli --cluster reshard
// does: IMPORTING, MIGRATING, MIGRATE of its keys, then NODE on both.
// between is called after each step, while the load runs.
func moveSlot(t *testing.T, slot int64, src, dst string, between func(step string)) {
	t.Helper()
	ctx := context.Background()
	sc := redis.NewClient(&redis.Options{Addr: src})
	dc := redis.NewClient(&redis.Options{Addr: dst})
	defer sc.Close()
	defer dc.Close()
	srcID, err1 := sc.ClusterMyID(ctx).Result()
	dstID, err2 := dc.ClusterMyID(ctx).Result()
	if err1 != nil || err2 != nil {
		t.Fatalf("CLUSTER MYID: %v %v", err1, err2)
	}
	must := func(err error, what string) {
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	must(dc.Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", srcID).Err(), "SETSLOT IMPORTING")
	must(sc.Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", dstID).Err(), "SETSLOT MIGRATING")
	between("migrating")
	host, port, _ := strings.Cut(dst, ":")
	for round := 0; ; round++ {
		keys, err := sc.ClusterGetKeysInSlot(ctx, int(slot), 100).Result()
		must(err, "GETKEYSINSLOT")
		if len(keys) == 0 {
			break
		}
		args := []any{"MIGRATE", host, port, "", 0, 5000, "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		if err := sc.Do(ctx, args...).Err(); err != nil && err.Error() != "NOKEY" {
			t.Fatalf("MIGRATE: %v", err)
		}
		if round == 0 {
			between("keys moved, slot not yet handed over")
		}
	}
	must(dc.Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", dstID).Err(), "SETSLOT NODE on the target")
	must(sc.Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", dstID).Err(), "SETSLOT NODE on the source")
	between("handed over")
}

// TestReshardUnderLoad moves the slot of a hot client key to another
// primary of the shared Cluster and back, while a Limiter (fail-closed, so
// an error would show) and an exact counter on the same slot run. While
// the slot is MIGRATING/IMPORTING the servers answer the scripts (a state
// key and a fresh call key) with TRYAGAIN; the store resends the same
// call until the slot is handed over, so every request is still decided
// by Redis, none fails; and the counter's admissions plus what remains
// equal its limit exactly: nothing is lost or counted twice in the moves.
// Each step of a move waits for the client to have seen a redirect during
// it (an event, not a pause), as a reshard of a slot with few keys is as
// short as its MIGRATE.
func TestReshardUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("failover tests are slow")
	}
	requireShared(t)
	base := runtime.NumGoroutine()
	var hits redirectCounter
	cc := redis.NewClusterClient(clusterOptions(sharedCluster.Addrs()))
	cc.OnNewNode(func(c *redis.Client) { c.AddHook(&hits) })
	r := newFoRigBudget(t, cc, "fail-closed-503", 2*time.Second)
	r.ips = []string{"203.0.113.7"}
	tag, slot, owner := hotSlot(t, r, r.ips[0])
	other := sharedCluster.Addrs()[0]
	if other == owner {
		other = sharedCluster.Addrs()[1]
	}

	const limit = 1_000_000
	now := time.Now().UnixNano()
	exact := stores.Request{Rule: "exact", Key: tag, Limit: ratelimit.PerHour(limit), Algorithm: stores.FixedWindow, Cost: 1,
		Window: stores.Window{Start: now - int64(time.Hour), End: now + int64(time.Hour)}}
	counter := newStore(cc, WithPrefix(r.prefix), WithTimeout(2*time.Second))
	var admitted, cerrs atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	r.load(stop, &wg)
	for range foWorkers {
		wg.Go(func() {
			for range foMaxIters {
				select {
				case <-stop:
					return
				default:
				}
				res, err := counter.Take(context.Background(), exact)
				switch {
				case err != nil:
					cerrs.Add(1)
					t.Errorf("counter: %v", err)
				case res.Allowed:
					admitted.Add(1)
				}
			}
		})
	}
	served := func() int {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.replies)
	}
	var steps []string
	between := func(step string) {
		switch step {
		case "migrating", "keys moved, slot not yet handed over":
			// Hold the slot in this state until a check met it.
			ta := hits.tryagain.Load()
			waitFor(t, 20*time.Second, "a TRYAGAIN during "+step, func() bool { return hits.tryagain.Load() > ta })
		default:
			n, a := served(), admitted.Load()+cerrs.Load()
			waitFor(t, 20*time.Second, "20 requests and 20 counts during "+step, func() bool {
				return served() >= n+20 && admitted.Load()+cerrs.Load() >= a+20
			})
		}
		steps = append(steps, fmt.Sprintf("%s: MOVED %d, TRYAGAIN %d, counter errors %d",
			step, hits.moved.Load(), hits.tryagain.Load(), cerrs.Load()))
	}
	between("before")
	moveSlot(t, slot, owner, other, between)
	moveSlot(t, slot, other, owner, between)
	handedBack := time.Now()
	close(stop)
	wg.Wait()

	res, err := counter.Take(context.Background(), stores.Request{Rule: exact.Rule, Key: exact.Key, Limit: exact.Limit, Algorithm: exact.Algorithm, Window: exact.Window})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("slot %s of key %q moved %s -> %s -> %s; cumulative redirects after each step: %s",
		strconv.FormatInt(slot, 10), tag, owner, other, owner, strings.Join(steps, "; "))
	t.Logf("counter: %d admitted, %d remaining of %d; %d errors", admitted.Load(), res.Remaining, limit, cerrs.Load())
	if got := admitted.Load() + int64(res.Remaining); got != limit {
		t.Errorf("admitted %d + remaining %d = %d, want exactly %d", admitted.Load(), res.Remaining, got, limit)
	}
	if hits.moved.Load() == 0 || hits.tryagain.Load() == 0 {
		t.Errorf("the client saw %d MOVED and %d TRYAGAIN: the moves did not test redirects", hits.moved.Load(), hits.tryagain.Load())
	}
	// Every request is decided by Redis: a check on a slot being moved
	// waits for the handover (within its budget) instead of failing.
	r.mu.Lock()
	var slowest time.Duration
	for _, rep := range r.replies {
		slowest = max(slowest, rep.end.Sub(rep.start))
		if rep.by != byRedis {
			t.Errorf("a request was not decided by Redis: status %d, error %v, %v after the final handover", rep.status, rep.err, rep.start.Sub(handedBack))
		}
	}
	t.Logf("limiter: %d requests, all decided by Redis; breaker opened %d times; slowest %v",
		len(r.replies), r.opened.Load(), slowest)
	if n := r.opened.Load(); n != 0 {
		t.Errorf("the breaker opened %d times", n)
	}
	r.mu.Unlock()
	cc.Close()
	goroutinesSettle(t, base, false)
}
