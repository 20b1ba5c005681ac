package redisstore

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/stores"
)

// TestScriptFlush: after SCRIPT FLUSH the next call reloads the script
// transparently, and the state Redis kept is intact.
func TestScriptFlush(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			client := b.client(t)
			s := newStore(client, WithPrefix(uniquePrefix(t)))
			req := gcraReq("k", ratelimit.PerHour(5), 2)
			mustTake(t, s, req)
			var err error
			switch c := client.(type) {
			case *redis.ClusterClient:
				err = c.ForEachShard(ctx, func(ctx context.Context, n *redis.Client) error { return n.ScriptFlush(ctx).Err() })
			case *redis.Ring:
				err = c.ForEachShard(ctx, func(ctx context.Context, n *redis.Client) error { return n.ScriptFlush(ctx).Err() })
			default:
				err = client.ScriptFlush(ctx).Err()
			}
			if err != nil {
				t.Fatal(err)
			}
			if ok, _ := client.ScriptExists(ctx, script.Hash()).Result(); len(ok) == 1 && ok[0] {
				t.Fatal("script still cached after SCRIPT FLUSH")
			}
			if res := mustTake(t, s, req); !res.Allowed || res.Remaining != 1 {
				t.Fatalf("after SCRIPT FLUSH: %+v, want allowed with 1 remaining", res)
			}
		})
	}
}

// TestServerRestart: while Redis is down every call fails quickly with an
// error, never a denial; after it is back calls succeed again.
func TestServerRestart(t *testing.T) {
	srv := startTestRedis(t)
	client := redis.NewClient(&redis.Options{
		Addr: srv.Addr, DialTimeout: 200 * time.Millisecond, DialerRetries: 1,
		MaxRetries: -1, ContextTimeoutEnabled: true,
	})
	defer client.Close()
	s := newStore(client)
	req := gcraReq("k", ratelimit.PerMinute(10), 1)
	if res := mustTake(t, s, req); !res.Allowed {
		t.Fatal(res)
	}

	srv.Stop()
	for range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		start := time.Now()
		res, err := s.Take(ctx, req)
		cancel()
		if err == nil || res != (stores.Result{}) {
			t.Fatalf("Take with Redis down = %+v, %v; want an error and a zero Result", res, err)
		}
		if !strings.HasPrefix(err.Error(), "ratelimit: redis: ") {
			t.Errorf("error %q lacks the ratelimit: redis: prefix", err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("Take with Redis down took %v", d)
		}
		if err := s.Return(context.Background(), req); err == nil {
			t.Error("Return with Redis down = nil")
		}
	}

	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	var res stores.Result
	var err error
	for range 5 { // the pool may hand out a connection from before the restart
		if res, err = s.Take(context.Background(), req); err == nil {
			break
		}
	}
	if err != nil || !res.Allowed {
		t.Fatalf("Take after restart = %+v, %v", res, err)
	}
	// The script cache was empty after the restart: it was reloaded.
	if res := mustTake(t, s, req); !res.Allowed || res.Remaining != 8 {
		t.Fatalf("second Take after restart = %+v", res)
	}
}

// TestUnresponsiveServer: a server that accepts TCP but never answers costs
// no more than the ctx deadline (with ContextTimeoutEnabled, as the
// middleware's time budget needs).
func TestUnresponsiveServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c) // never read from: the server is silent
		}
	}()
	defer func() {
		l.Close()
		<-accepted
		for _, c := range conns {
			c.Close()
		}
	}()

	client := redis.NewClient(&redis.Options{Addr: l.Addr().String(), MaxRetries: -1, ContextTimeoutEnabled: true, Protocol: 2, DisableIdentity: true})
	defer client.Close()
	s := newStore(client)
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	start := time.Now()
	res, err := s.Take(ctx, gcraReq("k", ratelimit.PerSecond(1), 1))
	if err == nil || res != (stores.Result{}) {
		t.Fatalf("Take on a silent server = %+v, %v", res, err)
	}
	if !errors.Is(err, context.DeadlineExceeded) && !strings.Contains(err.Error(), "timeout") {
		t.Errorf("error %v, want a deadline", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Take on a silent server took %v, want about the 150ms deadline", d)
	}
}

// TestFourInstances: four Stores on four clients, as four processes would
// be, hammer one key concurrently; the admitted count never exceeds the
// limit, for every algorithm.
func TestFourInstances(t *testing.T) {
	for _, b := range backends[:2] {
		t.Run(b.name, func(t *testing.T) {
			prefix := uniquePrefix(t)
			peers := make([]*Store, 4)
			for i := range peers {
				peers[i] = newStore(b.client(t), WithPrefix(prefix)) // server time
			}
			now := time.Now()
			fixed := withAlg(gcraReq("hot", ratelimit.PerHour(100), 1), stores.FixedWindow)
			fixed.Window = stores.Window{Start: now.Add(-time.Hour).UnixNano(), End: now.Add(time.Hour).UnixNano()}
			for _, req := range []stores.Request{
				gcraReq("hot", ratelimit.PerHour(100), 1),
				withAlg(gcraReq("hot", ratelimit.PerHour(100), 1), stores.SlidingWindow),
				fixed,
				func() stores.Request {
					r := gcraReq("hot2", ratelimit.PerHour(100), 3)
					r.Limit.Burst = 90
					return r
				}(),
			} {
				var admitted, units atomic.Int64
				var wg sync.WaitGroup
				errs := make(chan error, 1)
				for _, s := range peers {
					for range 12 {
						wg.Go(func() {
							for range 15 {
								res, err := s.Take(context.Background(), req)
								if err != nil {
									select {
									case errs <- err:
									default:
									}
									return
								}
								if res.Allowed {
									admitted.Add(1)
									units.Add(int64(req.Cost))
								}
							}
						})
					}
				}
				wg.Wait()
				close(errs)
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
				// 720 attempts on a capacity of 100 (or 90) units refilling at
				// one per 36s: within the test's few seconds at most one more.
				capacity := int64(req.Limit.Capacity())
				if units.Load() > capacity+int64(req.Cost) || units.Load() < capacity-int64(req.Cost)+1 {
					t.Errorf("%v cost %d: %d units admitted, want about %d and never more", req.Algorithm, req.Cost, units.Load(), capacity)
				}
				if req.Algorithm != stores.GCRA && units.Load() > capacity {
					t.Errorf("%v: %d admitted over a capacity of %d", req.Algorithm, units.Load(), capacity)
				}
			}

			// Concurrency: in-flight slots never exceed the limit.
			cc := withAlg(gcraReq("slots", stores.Limit{Rate: 5, Period: time.Minute}, 1), stores.Concurrency)
			var inflight, peak, acquired atomic.Int64
			var wg sync.WaitGroup
			for _, s := range peers {
				for range 8 {
					wg.Go(func() {
						for range 20 {
							res, err := s.Take(context.Background(), cc)
							if err != nil {
								t.Error(err)
								return
							}
							if !res.Allowed {
								continue
							}
							acquired.Add(1)
							n := inflight.Add(1)
							for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
							}
							inflight.Add(-1)
							if err := s.Return(context.Background(), cc); err != nil {
								t.Error(err)
								return
							}
						}
					})
				}
			}
			wg.Wait()
			if peak.Load() > 5 || acquired.Load() < 5 {
				t.Errorf("concurrency: peak %d in flight (limit 5), %d acquired", peak.Load(), acquired.Load())
			}
		})
	}
}
