package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores"
	"github.com/sluicehq/ratelimit/stores/memory"
)

// localFailing is a FailingStore that says it is local, so that a limiter
// asks it before the other rules' stores (cheap-first).
type localFailing struct{ ratelimittest.FailingStore }

func (localFailing) Local() bool { return true }

// TestStoreErrorIsReportedWhenAnotherRuleDenies: a rule whose store failed
// (fail open) and another rule that denies: the request is denied and the
// error still wraps ErrStoreUnavailable, from AllowN and from Check, as
// AllowN's contract says ("Allowed under fail open (unless another rule
// denied)") and as with the rule alone.
func TestStoreErrorIsReportedWhenAnotherRuleDenies(t *testing.T) {
	clock := ratelimittest.NewClock(ratelimittest.Epoch())
	down := errors.New("connection refused")
	l := ratelimit.NewRulesLimiter([]ratelimit.Rule{
		{Name: "broken", Limit: ratelimit.PerMinute(10), Key: ratelimit.Global(), Store: localFailing{ratelimittest.FailingStore{Err: down}}},
		{Name: "tight", Limit: ratelimit.PerMinute(1), Key: ratelimit.Global(), Store: memory.New(memory.WithClock(clock))},
	}, ratelimit.WithClock(clock))
	ctx := context.Background()
	if res, err := l.Allow(ctx, "k"); !res.Allowed || !errors.Is(err, ratelimit.ErrStoreUnavailable) {
		t.Fatalf("first Allow = %+v, %v; want allowed with ErrStoreUnavailable", res, err)
	}
	res, err := l.Allow(ctx, "k")
	if res.Allowed {
		t.Fatalf("second Allow allowed; want denied by rule tight")
	}
	if !errors.Is(err, ratelimit.ErrStoreUnavailable) || !errors.Is(err, down) || errors.Is(err, ratelimit.ErrInvalidRequest) {
		t.Errorf("second Allow error = %v; want the broken rule's store error (ErrStoreUnavailable, not ErrInvalidRequest)", err)
	}
	l.Check(httptest.NewRequest("GET", "/", nil)) // Global's key, not "k": allowed
	v := l.Check(httptest.NewRequest("GET", "/", nil))
	if !v.Denied() || !errors.Is(v.Err(), ratelimit.ErrStoreUnavailable) {
		t.Errorf("Check: Denied %v, Err %v; want denied with ErrStoreUnavailable", v.Denied(), v.Err())
	}
}

// TestRulesThatDecidedAreObservedWhenAnotherFailsClosed: when a rule's
// store failure stops the request (fail closed), each rule that its store
// had already decided still reports its decision: one event per rule, as
// when another rule denies.
func TestRulesThatDecidedAreObservedWhenAnotherFailsClosed(t *testing.T) {
	clock := ratelimittest.NewClock(ratelimittest.Epoch())
	ev := &recorder{}
	l := ratelimit.NewRulesLimiter([]ratelimit.Rule{
		{Name: "local", Limit: ratelimit.PerMinute(10), Key: ratelimit.Global(), Store: memory.New(memory.WithClock(clock))},
		{Name: "remote", Limit: ratelimit.PerMinute(10), Key: ratelimit.Global(),
			Store: ratelimittest.FailingStore{Err: errors.New("down")}, OnStoreError: ratelimit.FailurePolicy{Status: 503}},
	}, ratelimit.WithClock(clock), ratelimit.WithObserver(ev))
	for _, call := range []struct {
		name  string
		check func()
	}{
		{"Check", func() { l.Check(httptest.NewRequest("GET", "/", nil)) }},
		{"Allow", func() { l.Allow(context.Background(), "k") }},
	} {
		call.check()
		got := map[string][]ratelimit.Outcome{}
		ev.mu.Lock()
		for _, e := range ev.events {
			got[e.Rule] = append(got[e.Rule], e.Outcome)
		}
		ev.events = nil
		ev.mu.Unlock()
		if o := got["local"]; len(o) != 1 || o[0] != ratelimit.OutcomeAllowed {
			t.Errorf("%s: rule local reported %v; want one Allowed event", call.name, o)
		}
		if o := got["remote"]; len(o) != 1 || o[0] != ratelimit.OutcomeStoreError {
			t.Errorf("%s: rule remote reported %v; want one StoreError event", call.name, o)
		}
	}
}

// TestFallbackStoreCallIsBoundedByTheTimeBudget: WithTimeout bounds every
// store call, the fallback's included: a hung fallback behind a failed
// store adds at most the budget, after which the request fails open. (In a
// synctest bubble an unbounded wait is a deadlock, reported as a failure.)
func TestFallbackStoreCallIsBoundedByTheTimeBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := ratelimit.NewRulesLimiter([]ratelimit.Rule{{Limit: ratelimit.PerMinute(10), Key: ratelimit.Global(), OnStoreError: ratelimit.FailurePolicy{Fallback: hangingStore{}}}}, ratelimit.WithStore(ratelimittest.FailingStore{Err: errors.New("down")}), ratelimit.WithTimeout(50*time.Millisecond))
		start := time.Now()
		res, err := l.Allow(context.Background(), "k")
		if took := time.Since(start); took != 50*time.Millisecond {
			t.Errorf("Allow took %v; want exactly the 50ms budget of the fallback call", took)
		}
		if !res.Allowed || !errors.Is(err, ratelimit.ErrStoreUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Allow = %+v, %v; want allowed (fail open) with ErrStoreUnavailable wrapping the fallback's DeadlineExceeded", res, err)
		}
	})
}

// TestFallbackRejectingTheRequestIsAStoreFailureOnly: a fallback that
// rejects the request as invalid behind a failed store leaves an error that
// wraps ErrStoreUnavailable and not ErrInvalidRequest (never both), with the
// failure policy's answer.
func TestFallbackRejectingTheRequestIsAStoreFailureOnly(t *testing.T) {
	down := errors.New("down")
	for _, n := range []int{1, 2} {
		rules := []ratelimit.Rule{{Name: "a", Limit: ratelimit.PerMinute(10), Key: ratelimit.Global(),
			Store:        ratelimittest.FailingStore{Err: down},
			OnStoreError: ratelimit.FailurePolicy{Fallback: ratelimittest.FailingStore{Err: fmt.Errorf("odd limit: %w", ratelimit.ErrInvalidRequest)}}}}
		if n == 2 {
			rules = append(rules, ratelimit.Rule{Name: "b", Limit: ratelimit.PerMinute(10), Key: ratelimit.Global()})
		}
		l := ratelimit.NewRulesLimiter(rules)
		res, err := l.Allow(context.Background(), "k")
		if !res.Allowed || !errors.Is(err, ratelimit.ErrStoreUnavailable) || !errors.Is(err, down) || errors.Is(err, ratelimit.ErrInvalidRequest) {
			t.Errorf("%d rules: Allow = %+v, %v; want allowed (the fallback fails open) with ErrStoreUnavailable and not ErrInvalidRequest", n, res, err)
		}
	}
}

// ctxCheckingStore is a local store that refuses calls on a done context,
// as a networked store would.
type ctxCheckingStore struct{ ratelimit.Store }

func (ctxCheckingStore) Local() bool { return true }

func (s ctxCheckingStore) Return(ctx context.Context, req stores.Request) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.Store.Return(ctx, req)
}

// ctxStore fails every call with its context's error once it is done.
type ctxStore struct{ ratelimittest.FailingStore }

func (ctxStore) Take(ctx context.Context, _ stores.Request) (ratelimit.Result, error) {
	<-ctx.Done()
	return ratelimit.Result{}, ctx.Err()
}

// TestCompensationOutlivesTheRequestContext: a client that goes away while
// the second store is asked stops the request (fail closed); the units the
// first store granted are given back on a context that is not cancelled,
// so the key keeps its full capacity.
func TestCompensationOutlivesTheRequestContext(t *testing.T) {
	clock := ratelimittest.NewClock(ratelimittest.Epoch())
	first := ctxCheckingStore{memory.New(memory.WithClock(clock))}
	l := ratelimit.NewRulesLimiter([]ratelimit.Rule{
		{Name: "first", Limit: ratelimit.PerMinute(2), Key: ratelimit.Global(), Store: first},
		{Name: "second", Limit: ratelimit.PerMinute(10), Key: ratelimit.Global(), Store: ctxStore{}, OnStoreError: ratelimit.FailurePolicy{Status: 503}},
	}, ratelimit.WithClock(clock))
	for i := range 3 {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		res, err := l.AllowN(ctx, "k", 2)
		if res.Allowed || !errors.Is(err, ratelimit.ErrStoreUnavailable) || !errors.Is(err, context.Canceled) {
			t.Fatalf("call %d: AllowN = %+v, %v; want stopped by rule second's cancelled call", i, res, err)
		}
	}
	res, err := first.Take(context.Background(), stores.Request{Rule: "first", Key: "k", Limit: ratelimit.PerMinute(2), Cost: 2})
	if err != nil || !res.Allowed {
		t.Errorf("rule first after three stopped requests: %+v, %v; want its full capacity of 2 given back each time", res, err)
	}
}

// flakyStore fails every third call of its store's Take and TakeAll.
type flakyStore struct {
	ratelimit.Store
	calls atomic.Int64
}

var errFlaky = errors.New("flaky")

func (s *flakyStore) Take(ctx context.Context, req stores.Request) (ratelimit.Result, error) {
	if s.calls.Add(1)%3 == 0 {
		return ratelimit.Result{}, errFlaky
	}
	return s.Store.Take(ctx, req)
}

func (s *flakyStore) TakeAll(ctx context.Context, reqs []stores.Request, res []ratelimit.Result) error {
	if s.calls.Add(1)%3 == 0 {
		return errFlaky
	}
	return s.Store.TakeAll(ctx, reqs, res)
}

// TestOneEventPerRulePerDecisionUnderFailures: many goroutines check three
// rules on two flaky stores (fail open, fail closed, fallback). For every
// request, each rule reports at most one decision: Allowed, Denied or
// StoreError, or a Fallback followed by Allowed or Denied; never one
// after another, even when units are given back.
func TestOneEventPerRulePerDecisionUnderFailures(t *testing.T) {
	clock := ratelimittest.NewClock(ratelimittest.Epoch())
	one := &flakyStore{Store: memory.New(memory.WithClock(clock))}
	two := &flakyStore{Store: memory.New(memory.WithClock(clock))}
	var mu sync.Mutex
	byRequest := map[*http.Request][]ratelimit.Event{}
	obs := ratelimit.ObserverFunc(func(e ratelimit.Event) {
		mu.Lock()
		defer mu.Unlock()
		byRequest[e.Request] = append(byRequest[e.Request], e)
	})
	l := ratelimit.NewRulesLimiter([]ratelimit.Rule{
		{Name: "open", Limit: ratelimit.PerMinute(50), Key: ratelimit.Global(), Store: one},
		{Name: "closed", Limit: ratelimit.PerMinute(40), Key: ratelimit.Global(), Store: two, OnStoreError: ratelimit.FailurePolicy{Status: 503}},
		{Name: "fallback", Limit: ratelimit.PerMinute(30), Key: ratelimit.Global(), Store: two,
			OnStoreError: ratelimit.FailurePolicy{Fallback: memory.New(memory.WithClock(clock))}},
	}, ratelimit.WithClock(clock), ratelimit.WithObserver(obs))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				l.Check(httptest.NewRequest("GET", "/", nil)).Done()
			}
		})
	}
	wg.Wait()
	if len(byRequest) != 400 {
		t.Fatalf("events for %d requests, want 400", len(byRequest))
	}
	for _, events := range byRequest {
		perRule := map[string][]ratelimit.Outcome{}
		for _, e := range events {
			perRule[e.Rule] = append(perRule[e.Rule], e.Outcome)
		}
		for rule, o := range perRule {
			ok := len(o) == 1 && o[0] != ratelimit.OutcomeFallback ||
				len(o) == 2 && o[0] == ratelimit.OutcomeFallback && (o[1] == ratelimit.OutcomeAllowed || o[1] == ratelimit.OutcomeDenied)
			if !ok {
				t.Fatalf("rule %s reported %v for one request; want one decision", rule, o)
			}
		}
	}
}
