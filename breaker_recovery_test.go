package ratelimit_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/breaker"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores"
	"github.com/sluicehq/ratelimit/stores/memory"
)

// switchStore is a store that fails while down is set.
type switchStore struct {
	ratelimit.Store
	down atomic.Bool
}

func (s *switchStore) Take(ctx context.Context, r stores.Request) (ratelimit.Result, error) {
	if s.down.Load() {
		return ratelimit.Result{}, errStoreDown
	}
	return s.Store.Take(ctx, r)
}

func (s *switchStore) TakeAll(ctx context.Context, r []stores.Request, res []ratelimit.Result) error {
	if s.down.Load() {
		return errStoreDown
	}
	return s.Store.TakeAll(ctx, r, res)
}

func (s *switchStore) Return(ctx context.Context, r stores.Request) error {
	if s.down.Load() {
		return errStoreDown
	}
	return s.Store.Return(ctx, r)
}

// storeFn is a store whose every call returns f(ctx).
type storeFn func(ctx context.Context) error

func (f storeFn) Take(ctx context.Context, _ stores.Request) (ratelimit.Result, error) {
	return ratelimit.Result{}, f(ctx)
}

func (f storeFn) TakeAll(ctx context.Context, _ []stores.Request, _ []ratelimit.Result) error {
	return f(ctx)
}

func (f storeFn) Return(ctx context.Context, _ stores.Request) error { return f(ctx) }

// TestBreakerOpenAtReleaseLeaksNoSlot: a Concurrency slot taken while the
// breaker was closed is not locked out for its whole Period when the
// circuit is open as the request finishes.
func TestBreakerOpenAtReleaseLeaksNoSlot(t *testing.T) {
	clock := ratelimittest.NewClock(ratelimittest.Epoch())
	st := &switchStore{Store: memory.New(memory.WithClock(clock))}
	br := breaker.New(st, breaker.Config{Failures: 1, Cooldown: time.Second, Clock: clock})
	l := ratelimit.NewRulesLimiter([]ratelimit.Rule{{Limit: ratelimit.Limit{Rate: 1, Period: time.Minute}, Key: ratelimit.ByIP(), Algorithm: ratelimit.Concurrency}}, ratelimit.WithStore(br), ratelimit.WithClock(clock))
	done, ok := l.Admit(httptest.NewRecorder(), ratelimittest.NewRequest("GET", "/", ""))
	if !ok {
		t.Fatal("first request denied")
	}
	st.down.Store(true) // a blip while the request is in flight
	br.Take(context.Background(), stores.Request{Key: "other", Limit: ratelimit.PerSecond(1), Cost: 1})
	if br.State() != breaker.Open {
		t.Fatalf("breaker %v after a failure, want open", br.State())
	}
	st.down.Store(false) // the store is back
	done()               // the request finishes: Return is refused (circuit open)
	clock.Advance(2 * time.Second)
	br.Take(context.Background(), stores.Request{Key: "probe", Limit: ratelimit.PerSecond(1), Cost: 1}) // the probe closes it
	if br.State() != breaker.Closed {
		t.Fatalf("breaker %v after a successful probe, want closed", br.State())
	}
	if code, _, _ := serve(l.Handler(http.NotFoundHandler()), ratelimittest.NewRequest("GET", "/", "")); code != http.StatusNotFound {
		t.Errorf("next request, nothing in flight: %d: the slot leaked for its whole Period", code)
	}
}

// TestBreakerCancelledProbeKeepsCircuitOpen: a probe cancelled by its
// caller says nothing about the store: the circuit does not close.
func TestBreakerCancelledProbeKeepsCircuitOpen(t *testing.T) {
	clock := ratelimittest.NewClock(ratelimittest.Epoch())
	var cancelledOnly atomic.Bool
	st := storeFn(func(ctx context.Context) error {
		if cancelledOnly.Load() {
			<-ctx.Done()
			return ctx.Err()
		}
		return errStoreDown
	})
	br := breaker.New(st, breaker.Config{Failures: 1, Cooldown: time.Second, Clock: clock})
	req := stores.Request{Key: "k", Limit: ratelimit.PerSecond(1), Cost: 1}
	br.Take(context.Background(), req)
	if br.State() != breaker.Open {
		t.Fatalf("breaker %v after a failure, want open", br.State())
	}
	clock.Advance(2 * time.Second)
	cancelledOnly.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the client went away during the probe; the store is still dead
	if _, err := br.Take(ctx, req); err == nil {
		t.Error("the cancelled probe returned no error")
	}
	if br.State() == breaker.Closed {
		t.Error("a cancelled probe closed the circuit; the store never answered")
	}
}

// TestBreakerHungProbeDoesNotBlockRecovery: a probe that never returns
// does not keep the breaker half-open once the store is healthy again.
func TestBreakerHungProbeDoesNotBlockRecovery(t *testing.T) {
	clock := ratelimittest.NewClock(ratelimittest.Epoch())
	var mode atomic.Int32 // 0 fail, 1 hang, 2 healthy
	block := make(chan struct{})
	entered := make(chan struct{}) // closed when the probe reaches the store
	st := storeFn(func(ctx context.Context) error {
		switch mode.Load() {
		case 0:
			return errStoreDown
		case 1:
			close(entered)
			<-block
			return errStoreDown
		}
		return nil
	})
	br := breaker.New(st, breaker.Config{Failures: 1, Clock: clock})
	req := stores.Request{Key: "k", Limit: ratelimit.PerSecond(1), Cost: 1}
	br.Take(context.Background(), req)
	clock.Advance(2 * time.Second)
	mode.Store(1)
	probed := make(chan struct{})
	go func() { // the probe hangs (no deadline)
		defer close(probed)
		br.Take(context.Background(), req)
	}()
	<-entered
	mode.Store(2) // the store is healthy again
	clock.Advance(time.Hour)
	if _, err := br.Take(context.Background(), req); err != nil {
		t.Errorf("an hour later, healthy store: %v (state %v): stuck half-open behind a hung probe", err, br.State())
	}
	close(block)
	<-probed
}

// TestBreakerRecoversAfterFlapping: goroutines hammer a breaker while the
// store flaps and time moves; once the store stays up and a cooldown has
// passed, the breaker closes.
func TestBreakerRecoversAfterFlapping(t *testing.T) {
	clock := ratelimittest.NewClock(ratelimittest.Epoch())
	st := &switchStore{Store: memory.New(memory.WithClock(clock))}
	var mu sync.Mutex
	opened := 0
	br := breaker.New(st, breaker.Config{Failures: 2, Cooldown: time.Millisecond, MaxCooldown: 4 * time.Millisecond, Clock: clock,
		OnStateChange: func(_, to breaker.State) {
			if to == breaker.Open {
				mu.Lock()
				opened++
				mu.Unlock()
			}
		}})
	req := stores.Request{Key: "k", Limit: ratelimit.PerSecond(1e6), Cost: 1}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				if (i+g)%11 == 0 {
					st.down.Store(!st.down.Load())
				}
				if i%5 == 0 {
					clock.Advance(time.Millisecond)
				}
				br.Take(context.Background(), req)
				br.Return(context.Background(), req)
			}
		})
	}
	wg.Wait()
	st.down.Store(false)
	clock.Advance(time.Minute) // past any cooldown
	for range 3 {
		br.Take(context.Background(), req)
	}
	if br.State() != breaker.Closed {
		t.Errorf("breaker %v after the store recovered, want closed", br.State())
	}
	mu.Lock()
	defer mu.Unlock()
	if opened == 0 {
		t.Error("the circuit never opened: the test did not flap the store")
	}
}
