package adaptive_test

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/adaptive"
	"github.com/sluicehq/ratelimit/ratelimittest"
)

// lateContext is a context whose deadline has passed but whose timer has
// not fired yet: Err is still nil, as for a request that ends at its
// deadline, just before the context learns of it.
type lateContext struct{ context.Context }

func (lateContext) Deadline() (time.Time, bool) { return time.Now().Add(-time.Millisecond), true }

// TestDefaultClassifyNeverDropsForTheCallersDeadline: the deadline a request
// carries into the limiter is the caller's choice; when it ends the
// request, whatever the handler answered (nothing, or the 504 of a
// dependency that gave up on that deadline), the request is abandoned: it
// counts only as the latency it had (SampleAbandoned), never as a drop. Only the 502-504 the server answered while the caller
// was still waiting are drops. A request whose caller's deadline expired
// was a drop, so a client sending requests with tiny deadlines shrank
// everyone's limit.
func TestDefaultClassifyNeverDropsForTheCallersDeadline(t *testing.T) {
	r := ratelimittest.NewRequest("GET", "/", "")
	expired, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel()
	ahead, cancel2 := context.WithTimeout(context.Background(), time.Hour)
	defer cancel2()
	late := lateContext{context.Background()}
	for _, c := range []struct {
		name   string
		ctx    context.Context
		status int
		want   adaptive.Sample
	}{
		{"the caller's deadline expired, nothing written", expired, 0, adaptive.SampleAbandoned},
		{"the caller's deadline expired, 200", expired, 200, adaptive.SampleAbandoned},
		{"the caller's deadline expired, 504", expired, 504, adaptive.SampleAbandoned},
		{"the caller's deadline expired, 503", expired, 503, adaptive.SampleAbandoned},
		{"the caller's deadline passed, its timer yet to fire, 504", late, 504, adaptive.SampleAbandoned},
		{"the caller's deadline passed, its timer yet to fire, 502", late, 502, adaptive.SampleAbandoned},
		{"the caller's deadline passed, its timer yet to fire, 200", late, 200, adaptive.SampleSuccess},
		{"the caller's deadline ahead, 504", ahead, 504, adaptive.SampleDrop},
		{"the caller's deadline ahead, 503", ahead, 503, adaptive.SampleDrop},
		{"the caller's deadline ahead, 200", ahead, 200, adaptive.SampleSuccess},
		{"no deadline, 504", context.Background(), 504, adaptive.SampleDrop},
		{"client closed request", context.Background(), 499, adaptive.SampleAbandoned},
	} {
		if got := adaptive.DefaultClassify(r.WithContext(c.ctx), c.status, time.Millisecond); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestCallerDeadlinesDoNotShrinkTheLimitOverHTTP: one caller sending
// requests with a 1 ms deadline in their context (as middleware that takes
// a deadline from a header would), which the handler passes on to a
// dependency that gives up with a 504, beside 20 closed-loop callers of a
// 10 ms handler, must not bring the limit down. On the virtual clock of a
// synctest bubble.
func TestCallerDeadlinesDoNotShrinkTheLimitOverHTTP(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			clients = 20
			warmUp  = time.Second
			attack  = 2 * time.Second
			backoff = 5 * time.Millisecond
		)
		start := time.Now()
		var mu sync.Mutex
		lowest := 1 << 30 // the lowest limit during the attack
		cfg := &adaptive.Config{OnWindow: func(st adaptive.State) {
			mu.Lock()
			defer mu.Unlock()
			if !time.Now().Before(start.Add(warmUp)) {
				lowest = min(lowest, st.Limit)
			}
		}}
		l := ratelimit.NewRulesLimiter([]ratelimit.Rule{{Name: "inflight", Key: ratelimit.Global(), Adaptive: cfg}})
		h := l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			t := time.NewTimer(10 * time.Millisecond) // the dependency
			defer t.Stop()
			select {
			case <-t.C:
				w.WriteHeader(http.StatusOK)
			case <-r.Context().Done():
				w.WriteHeader(http.StatusGatewayTimeout)
			}
		}))
		end := start.Add(warmUp + attack)
		var wg sync.WaitGroup
		calls, refused := make([]int, clients), make([]int, clients)
		for i := range clients {
			wg.Go(func() {
				w := ratelimittest.NewDiscardWriter()
				for time.Now().Before(end) {
					attacking := !time.Now().Before(start.Add(warmUp))
					w.Reset()
					h.ServeHTTP(w, ratelimittest.NewRequest("GET", "/", "192.0.2.1:1234"))
					if attacking {
						calls[i]++
					}
					if w.Code == http.StatusServiceUnavailable {
						if attacking {
							refused[i]++
						}
						time.Sleep(backoff)
					}
				}
			})
		}
		before := 0 // the limit when the attack starts
		wg.Go(func() {
			time.Sleep(warmUp)
			before = l.Adaptive("inflight")[0].Limit
			w := ratelimittest.NewDiscardWriter()
			for time.Now().Before(end) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
				w.Reset()
				h.ServeHTTP(w, ratelimittest.NewRequest("GET", "/", "192.0.2.2:1234").WithContext(ctx))
				cancel()
				if w.Code == http.StatusServiceUnavailable {
					time.Sleep(time.Millisecond)
				}
			}
		})
		wg.Wait()
		var n, r int
		for i := range clients {
			n, r = n+calls[i], r+refused[i]
		}
		t.Logf("during the attack: %d of the clients' %d requests refused (%.2f%%); limit %d at its start, lowest %d", r, n, 100*float64(r)/float64(n), before, lowest)
		if n == 0 || float64(r) > 0.01*float64(n) {
			t.Fatalf("%d of the well-behaved clients' %d requests refused during the attack; want at most 1%%", r, n)
		}
	})
}

// TestServerTimeoutIsADropOnlyWhereTheLimiterSeesIt: the 503 of an
// http.TimeoutHandler the limiter wraps is the server's decision, a drop;
// the deadline of one that wraps the limiter is on the request's context
// when it enters the limiter, where nothing tells it from a caller's: it
// is abandoned (its latency, when slow, not a drop), as docs/adaptive.md
// says.
func TestServerTimeoutIsADropOnlyWhereTheLimiterSeesIt(t *testing.T) {
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // a dependency that takes a second, given the request's context
		case <-time.After(time.Second):
		case <-r.Context().Done():
		}
	})
	for _, c := range []struct {
		name string
		wrap func(l *ratelimit.Limiter) http.Handler
		want adaptive.Sample
	}{
		{"the limiter wraps the timeout", func(l *ratelimit.Limiter) http.Handler {
			return l.Handler(http.TimeoutHandler(slow, 10*time.Millisecond, "timeout"))
		}, adaptive.SampleDrop},
		{"the timeout wraps the limiter", func(l *ratelimit.Limiter) http.Handler {
			return http.TimeoutHandler(l.Handler(slow), 10*time.Millisecond, "timeout")
		}, adaptive.SampleAbandoned},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				seen := make(chan adaptive.Sample, 1)
				cfg := &adaptive.Config{Classify: func(r *http.Request, status int, elapsed time.Duration) adaptive.Sample {
					v := adaptive.DefaultClassify(r, status, elapsed)
					seen <- v
					return v
				}}
				l := ratelimit.NewRulesLimiter([]ratelimit.Rule{{Name: "inflight", Key: ratelimit.Global(), Adaptive: cfg}})
				w := ratelimittest.NewDiscardWriter()
				c.wrap(l).ServeHTTP(w, ratelimittest.NewRequest("GET", "/", "192.0.2.1:1234"))
				if w.Code != http.StatusServiceUnavailable {
					t.Fatalf("status %d, want the timeout's 503", w.Code)
				}
				if got := <-seen; got != c.want {
					t.Fatalf("classified %v, want %v", got, c.want)
				}
			})
		})
	}
}

// TestOverloadIsSeenWhenCallersBringDeadlines: a server that serves 4
// requests at a time in 10 ms each, behind an adaptive limit, and 60
// closed-loop callers that each give up after 15 ms or 30 ms. Under
// overload the requests admitted queue for the server until their callers'
// deadlines end them, so the limit must come down to what the server
// serves in time: once it has come down from its start (a second), at most
// 20% of the requests admitted time out. With a caller's deadline ignored
// outright, 90% and more did and the limit stayed near its start; as
// SampleAbandoned, a request abandoned later than Tolerance times the
// minimum RTT is a drop (the server was too slow for it), while the 1 ms
// deadlines of TestCallerDeadlinesDoNotShrinkTheLimitOverHTTP say nothing.
func TestOverloadIsSeenWhenCallersBringDeadlines(t *testing.T) {
	for _, deadline := range []time.Duration{15 * time.Millisecond, 30 * time.Millisecond} {
		t.Run(deadline.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const callers, warmUp, run = 60, time.Second, 4 * time.Second
				server := make(chan struct{}, 4)
				l := ratelimit.NewRulesLimiter([]ratelimit.Rule{{Name: "inflight", Key: ratelimit.Global(), Adaptive: &adaptive.Config{}}})
				h := l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					select {
					case server <- struct{}{}:
					case <-r.Context().Done():
						return
					}
					defer func() { <-server }()
					work := time.NewTimer(10 * time.Millisecond)
					defer work.Stop()
					select {
					case <-work.C:
						w.WriteHeader(http.StatusOK)
					case <-r.Context().Done():
					}
				}))
				settled, end := time.Now().Add(warmUp), time.Now().Add(run)
				var admitted, timedOut atomic.Int64
				var wg sync.WaitGroup
				for range callers {
					wg.Go(func() {
						w := ratelimittest.NewDiscardWriter()
						for time.Now().Before(end) {
							ctx, cancel := context.WithTimeout(context.Background(), deadline)
							w.Reset()
							h.ServeHTTP(w, ratelimittest.NewRequest("GET", "/", "192.0.2.1:1234").WithContext(ctx))
							late := ctx.Err() != nil
							cancel()
							if w.Code == http.StatusServiceUnavailable && w.Header().Get("RateLimit-Policy") != "" {
								time.Sleep(time.Millisecond) // refused by the limit: back off
								continue
							}
							if time.Now().Before(settled) {
								continue // the limit is still coming down from its start
							}
							admitted.Add(1)
							if late {
								timedOut.Add(1)
							}
						}
					})
				}
				wg.Wait()
				a, to := admitted.Load(), timedOut.Load()
				t.Logf("%d admitted, %d of them timed out (%.1f%%); limit %d", a, to, 100*float64(to)/float64(a), l.Adaptive("inflight")[0].Limit)
				if a == 0 || float64(to) > 0.2*float64(a) {
					t.Fatalf("%d of %d admitted requests outlived their callers' deadlines; want at most 20%%", to, a)
				}
			})
		})
	}
}
