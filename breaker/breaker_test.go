package breaker_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
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

// flakyStore fails while down is set and counts the calls that reach it.
type flakyStore struct {
	ratelimit.Store
	down  atomic.Bool
	calls atomic.Int64
}

func (f *flakyStore) Take(ctx context.Context, r stores.Request) (ratelimit.Result, error) {
	f.calls.Add(1)
	if f.down.Load() {
		return ratelimit.Result{}, errDown
	}
	return f.Store.Take(ctx, r)
}

var (
	errDown = errors.New("store down")
	ok      = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
)

// byPeer keys requests by RemoteAddr.
func byPeer(r *http.Request) (string, error) { return r.RemoteAddr, nil }

func newClock() *ratelimittest.Clock { return ratelimittest.NewClock(ratelimittest.Epoch()) }

// TestBreakerOpensProbesAndCloses walks the circuit through its states:
// consecutive failures open it, an open circuit never calls the store, a
// failed probe doubles the cooldown, a good probe closes it, and invalid
// requests never count as failures.
func TestBreakerOpensProbesAndCloses(t *testing.T) {
	clock := newClock()
	flaky := &flakyStore{Store: memory.New(memory.WithClock(clock))}
	var mu sync.Mutex
	var transitions []string
	b := breaker.New(flaky, breaker.Config{
		Failures: 3, Cooldown: time.Second, MaxCooldown: 4 * time.Second, Clock: clock,
		OnStateChange: func(from, to breaker.State) {
			mu.Lock()
			transitions = append(transitions, from.String()+"->"+to.String())
			mu.Unlock()
		},
	})
	req := stores.Request{Key: "k", Limit: ratelimit.PerSecond(100), Cost: 1}
	take := func() error { _, err := b.Take(context.Background(), req); return err }

	flaky.down.Store(true)
	for i := 0; i < 3; i++ {
		if err := take(); !errors.Is(err, errDown) {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if b.State() != breaker.Open {
		t.Fatalf("after 3 failures: %v", b.State())
	}
	calls := flaky.calls.Load()
	for i := 0; i < 100; i++ {
		if err := take(); !errors.Is(err, breaker.ErrOpen) || !errors.Is(err, ratelimit.ErrStoreUnavailable) {
			t.Fatalf("open circuit: %v", err)
		}
	}
	if flaky.calls.Load() != calls {
		t.Fatal("an open circuit still called the store")
	}
	// After the cooldown one probe goes through; it fails: twice the cooldown.
	clock.Advance(time.Second)
	if err := take(); !errors.Is(err, errDown) {
		t.Fatalf("probe: %v", err)
	}
	clock.Advance(1500 * time.Millisecond)
	if err := take(); !errors.Is(err, breaker.ErrOpen) {
		t.Fatalf("within the doubled cooldown: %v", err)
	}
	// The store recovers: the next probe closes the circuit.
	flaky.down.Store(false)
	clock.Advance(500 * time.Millisecond)
	if err := take(); err != nil {
		t.Fatalf("successful probe: %v", err)
	}
	if b.State() != breaker.Closed {
		t.Fatalf("after a good probe: %v", b.State())
	}
	// Invalid requests are not store failures.
	for i := 0; i < 10; i++ {
		b.Take(context.Background(), stores.Request{Key: "k", Cost: 1})
	}
	if b.State() != breaker.Closed {
		t.Fatal("invalid requests opened the circuit")
	}
	want := "closed->open open->half-open half-open->open open->half-open half-open->closed"
	if got := strings.Join(transitions, " "); got != want {
		t.Fatalf("transitions %q, want %q", got, want)
	}
}

// TestBreakerWithFallbackRule: with the circuit open the rule's fallback
// store limits, and the failing store is called only until the circuit opens.
func TestBreakerWithFallbackRule(t *testing.T) {
	clock := newClock()
	flaky := &flakyStore{Store: memory.New(memory.WithClock(clock))}
	flaky.down.Store(true)
	b := breaker.New(flaky, breaker.Config{Failures: 2, Clock: clock})
	local := memory.New(memory.WithClock(clock))
	h := ratelimit.NewRules([]ratelimit.Rule{{
		Name: "fleet", Limit: ratelimit.PerMinute(3), Key: byPeer, Store: b, OnStoreError: ratelimit.FailurePolicy{Fallback: local},
	}})(ok)
	n, _ := ratelimittest.FirstLimited(h, 10, func() *http.Request { return ratelimittest.NewRequest("GET", "/", "") })
	if n != 4 {
		t.Fatalf("with Redis down the local fallback limits: first 429 at %d, want 4", n)
	}
	if got := flaky.calls.Load(); got != 2 {
		t.Fatalf("the open circuit let %d calls reach the failing store, want 2", got)
	}
}

// TestOpenCircuitErrorContract pins the errors.Is contract: a call refused by
// an open circuit matches ErrOpen and ratelimit.ErrStoreUnavailable; the
// store's own errors pass through unchanged and never match ErrOpen.
func TestOpenCircuitErrorContract(t *testing.T) {
	clock := newClock()
	flaky := &flakyStore{Store: memory.New(memory.WithClock(clock))}
	flaky.down.Store(true)
	b := breaker.New(flaky, breaker.Config{Failures: 1, Clock: clock})
	req := stores.Request{Key: "k", Limit: ratelimit.PerSecond(1), Cost: 1}
	_, err := b.Take(context.Background(), req)
	if err != errDown || errors.Is(err, breaker.ErrOpen) {
		t.Fatalf("the store's own error: %v; want it unchanged, not ErrOpen", err)
	}
	results := make([]ratelimit.Result, 1)
	for name, err := range map[string]error{
		"Take":    func() error { _, err := b.Take(context.Background(), req); return err }(),
		"TakeAll": b.TakeAll(context.Background(), []stores.Request{req}, results),
	} {
		if !errors.Is(err, breaker.ErrOpen) || !errors.Is(err, ratelimit.ErrStoreUnavailable) {
			t.Errorf("%s on an open circuit: %v; want ErrOpen and ErrStoreUnavailable", name, err)
		}
		if errors.Is(err, ratelimit.ErrInvalidRequest) {
			t.Errorf("%s on an open circuit matches ErrInvalidRequest: %v", name, err)
		}
	}
	if n := flaky.calls.Load(); n != 1 {
		t.Fatalf("the open circuit called the store: %d calls, want 1", n)
	}
}

func TestNewPanicsWithoutStore(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.HasPrefix(fmt.Sprint(r), "ratelimit: ") {
			t.Fatalf("breaker.New(nil) recovered %v; want a ratelimit: panic", r)
		}
	}()
	breaker.New(nil, breaker.Config{})
}
