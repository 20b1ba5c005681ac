package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/adaptive"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores"
	"github.com/sluicehq/ratelimit/stores/memory"
)

// errCircuit is the kind of error a circuit breaker returns while open: it
// wraps ErrStoreUnavailable itself.
var errCircuit = fmt.Errorf("%w: circuit open", ratelimit.ErrStoreUnavailable)

// errContract is one row of the error contract: what a failing rule's
// store does, and what Allow, AllowN and Check must report for it.
type errContract struct {
	name    string
	store   ratelimit.Store
	policy  ratelimit.FailurePolicy
	opts    []ratelimit.Option
	n       int  // events for AllowN
	allowed bool // the Result's (and the Verdict's) answer
	is      []error
	isNot   []error
	check   bool // Check too (AllowN's n is not a request's cost)
}

func errContracts() []errContract {
	invalid := fmt.Errorf("%w: a limit no store enforces", ratelimit.ErrInvalidRequest)
	return []errContract{
		{name: "store-error", store: failingStore, n: 1, allowed: true, check: true,
			is: []error{ratelimit.ErrStoreUnavailable, errDown}, isNot: []error{ratelimit.ErrInvalidRequest}},
		{name: "fail-closed", store: failingStore, policy: ratelimit.FailurePolicy{Status: 503}, n: 1, check: true,
			is: []error{ratelimit.ErrStoreUnavailable, errDown}, isNot: []error{ratelimit.ErrInvalidRequest}},
		{name: "timeout", store: hangingStore{}, opts: []ratelimit.Option{ratelimit.WithTimeout(time.Millisecond)}, n: 1, allowed: true, check: true,
			is: []error{ratelimit.ErrStoreUnavailable, context.DeadlineExceeded}, isNot: []error{ratelimit.ErrInvalidRequest}},
		{name: "circuit-open", store: ratelimittest.FailingStore{Err: errCircuit}, n: 1, allowed: true, check: true,
			is: []error{ratelimit.ErrStoreUnavailable, errCircuit}, isNot: []error{ratelimit.ErrInvalidRequest}},
		{name: "fallback", store: failingStore, policy: ratelimit.FailurePolicy{Fallback: memory.New(memory.WithClock(newClock()))}, n: 1, allowed: true, check: true},
		{name: "store-rejects-request", store: ratelimittest.FailingStore{Err: invalid}, policy: ratelimit.FailurePolicy{Status: 503}, n: 1, check: true,
			is: []error{ratelimit.ErrInvalidRequest}, isNot: []error{ratelimit.ErrStoreUnavailable}},
		{name: "n-above-capacity", store: failingStore, n: 100,
			is: []error{ratelimit.ErrInvalidRequest}, isNot: []error{ratelimit.ErrStoreUnavailable}},
		{name: "n-negative", store: failingStore, n: -1,
			is: []error{ratelimit.ErrInvalidRequest}, isNot: []error{ratelimit.ErrStoreUnavailable}},
	}
}

// contractLimiter has the failing rule alone or beside a healthy one.
func contractLimiter(c errContract, rules int, rec *recorder) *ratelimit.Limiter {
	rs := []ratelimit.Rule{{Name: "failing", Limit: ratelimit.PerMinute(10), Key: byPeer, Store: c.store, OnStoreError: c.policy}}
	if rules == 2 {
		rs = append(rs, ratelimit.Rule{Name: "healthy", Limit: ratelimit.PerMinute(50), Key: byPeer})
	}
	opts := append([]ratelimit.Option{ratelimit.WithClock(newClock()), ratelimit.WithObserver(rec)}, c.opts...)
	return ratelimit.NewRulesLimiter(rs, opts...)
}

func checkErr(t *testing.T, what string, err error, c errContract) {
	t.Helper()
	if c.is == nil && err != nil {
		t.Fatalf("%s: error %v, want nil", what, err)
	}
	for _, target := range c.is {
		if !errors.Is(err, target) {
			t.Fatalf("%s: error %v does not match %v", what, err, target)
		}
	}
	for _, target := range c.isNot {
		if errors.Is(err, target) {
			t.Fatalf("%s: error %v matches %v", what, err, target)
		}
	}
}

func TestErrorContractSameForOneRuleAndSeveral(t *testing.T) {
	for _, c := range errContracts() {
		for _, rules := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s/%d-rules", c.name, rules), func(t *testing.T) {
				rec := &recorder{}
				l := contractLimiter(c, rules, rec)
				res, err := l.AllowN(context.Background(), "alice", c.n)
				checkErr(t, "AllowN", err, c)
				if res.Allowed != c.allowed {
					t.Fatalf("AllowN: %+v, want Allowed %v", res, c.allowed)
				}
				if c.n >= 0 && len(rec.events) == 0 {
					t.Fatal("AllowN reported nothing to the observers")
				}
				if !c.check {
					return
				}
				v := l.Check(ratelimittest.NewRequest("GET", "/", ""))
				checkErr(t, "Check", v.Err(), c)
				if v.Allowed() != c.allowed {
					t.Fatalf("Check: allowed %v, want %v", v.Allowed(), c.allowed)
				}
				v.Done()
			})
		}
	}
}

func TestKeyErrorVerdictIsNotAStoreFailure(t *testing.T) {
	l := ratelimit.NewLimiter(ratelimit.PerMinute(1), byPeer)
	r := ratelimittest.NewRequest("GET", "/", "")
	r.RemoteAddr = ""
	v := l.Check(r)
	if v.Allowed() || v.Denied() || v.Status() != http.StatusBadRequest ||
		!errors.Is(v.Err(), ratelimit.ErrNoKey) || errors.Is(v.Err(), ratelimit.ErrStoreUnavailable) {
		t.Fatalf("key error verdict: allowed %v denied %v status %d err %v", v.Allowed(), v.Denied(), v.Status(), v.Err())
	}
}

func TestCheckWritesNothingUntilWrite(t *testing.T) {
	l := ratelimit.NewLimiter(ratelimit.PerMinute(1), byPeer, ratelimit.WithName("one"), ratelimit.WithClock(newClock()))
	r := ratelimittest.NewRequest("GET", "/", "")
	if v := l.Check(r); !v.Allowed() || v.Result().Remaining != 0 || v.Rule() != "one" {
		t.Fatalf("first: allowed %v %+v rule %q", v.Allowed(), v.Result(), v.Rule())
	}
	v := l.Check(r)
	if v.Allowed() || !v.Denied() || v.Status() != 429 || len(v.Violated()) != 1 || v.Result().RetryAfter <= 0 {
		t.Fatalf("second: allowed %v denied %v status %d violated %v %+v", v.Allowed(), v.Denied(), v.Status(), v.Violated(), v.Result())
	}
	w := httptest.NewRecorder()
	v.SetHeaders(w.Header())
	if w.Code != 200 || w.Body.Len() != 0 || w.Header().Get("Retry-After") == "" || w.Header().Get("RateLimit") == "" {
		t.Fatalf("SetHeaders: code %d body %q headers %v", w.Code, w.Body, w.Header())
	}
	w = httptest.NewRecorder()
	v.Write(w)
	if w.Code != 429 || w.Header().Get("Content-Type") != "application/problem+json" || w.Body.Len() == 0 {
		t.Fatalf("Write: code %d headers %v", w.Code, w.Header())
	}
}

func TestVerdictDoneReleasesConcurrencySlot(t *testing.T) {
	for _, rules := range []int{1, 2} {
		rs := []ratelimit.Rule{{Name: "inflight", Limit: ratelimit.Limit{Rate: 1, Period: time.Minute}, Algorithm: ratelimit.Concurrency, Key: byPeer}}
		if rules == 2 {
			rs = append(rs, ratelimit.Rule{Name: "rate", Limit: ratelimit.PerMinute(100), Key: byPeer})
		}
		l := ratelimit.NewRulesLimiter(rs, ratelimit.WithClock(newClock()))
		r := ratelimittest.NewRequest("GET", "/", "")
		// The second round fails if the first one's repeated Done freed
		// the second holder's slot.
		for round := 1; round <= 2; round++ {
			held := l.Check(r)
			if !held.Allowed() {
				t.Fatalf("%d rules, round %d: the slot was not free", rules, round)
			}
			if l.Check(r).Allowed() {
				t.Fatalf("%d rules, round %d: a second request in flight was allowed", rules, round)
			}
			held.Done()
			held.Done() // a second Done releases nothing more
		}
	}
}

func TestVerdictDoneStatusReachesAdaptiveRule(t *testing.T) {
	var seen atomic.Int64
	l := ratelimit.NewRulesLimiter([]ratelimit.Rule{{Name: "inflight", Key: ratelimit.Global(), Adaptive: &adaptive.Config{
		Min: 1, Max: 1, Initial: 1,
		Classify: func(_ *http.Request, status int, _ time.Duration) adaptive.Sample {
			seen.Store(int64(status))
			return adaptive.SampleIgnore
		},
	}}})
	r := ratelimittest.NewRequest("GET", "/", "")
	v := l.Check(r)
	if !v.Allowed() {
		t.Fatal("first request rejected")
	}
	if w := l.Check(r); w.Allowed() || w.Status() != http.StatusServiceUnavailable {
		t.Fatalf("second request in flight: allowed %v status %d", w.Allowed(), w.Status())
	}
	v.DoneStatus(http.StatusBadGateway)
	if seen.Load() != http.StatusBadGateway {
		t.Fatalf("classifier saw status %d, want 502", seen.Load())
	}
	// Done reads the status from a writer given to Write that records one.
	v = l.Check(r)
	if !v.Allowed() {
		t.Fatal("the adaptive slot was not released")
	}
	v.Write(statusRecorder{httptest.NewRecorder(), http.StatusTeapot})
	v.Done()
	if seen.Load() != http.StatusTeapot {
		t.Fatalf("classifier saw status %d, want the writer's 418", seen.Load())
	}
}

type statusRecorder struct {
	*httptest.ResponseRecorder
	status int
}

func (s statusRecorder) Status() int { return s.status }

func TestAllowCompensatesAcrossStores(t *testing.T) {
	clock := newClock()
	local := memory.New(memory.WithClock(clock))
	remote := memory.New(memory.WithClock(clock))
	l := ratelimit.NewRulesLimiter([]ratelimit.Rule{
		{Name: "wide", Limit: ratelimit.PerMinute(10), Key: byPeer, Store: local},
		{Name: "tight", Limit: ratelimit.PerMinute(1), Key: byPeer, Store: remote},
	}, ratelimit.WithClock(clock))
	ctx := context.Background()
	if res, err := l.Allow(ctx, "alice"); err != nil || !res.Allowed {
		t.Fatalf("first: %+v %v", res, err)
	}
	for i := 0; i < 3; i++ {
		if res, err := l.Allow(ctx, "alice"); err != nil || res.Allowed {
			t.Fatalf("denied attempt %d: %+v %v", i, res, err)
		}
	}
	if got := remaining(t, local, "wide", "alice", ratelimit.PerMinute(10)); got != 9 {
		t.Fatalf("the wide rule has %d left, want 9: denials consumed it", got)
	}
}

// countingStore counts the units its store granted and those given back.
type countingStore struct {
	ratelimit.Store
	taken, returned atomic.Int64
}

func (s *countingStore) Take(ctx context.Context, req stores.Request) (ratelimit.Result, error) {
	res, err := s.Store.Take(ctx, req)
	if err == nil && res.Allowed {
		s.taken.Add(int64(req.Cost))
	}
	return res, err
}

func (s *countingStore) TakeAll(ctx context.Context, reqs []stores.Request, res []ratelimit.Result) error {
	err := s.Store.TakeAll(ctx, reqs, res)
	if err == nil && !slices.ContainsFunc(res, func(r ratelimit.Result) bool { return !r.Allowed }) {
		for _, r := range reqs {
			s.taken.Add(int64(r.Cost))
		}
	}
	return err
}

func (s *countingStore) Return(ctx context.Context, req stores.Request) error {
	s.returned.Add(int64(req.Cost))
	return s.Store.Return(ctx, req)
}

// TestVerdictCopiesReleaseSlotsOnceUnderContention: many goroutines check
// two Concurrency rules on two stores and call Done on two copies of each
// admitted verdict at once. Never more requests in flight than the tighter
// rule allows, every slot taken is given back exactly once (compensation
// included), and the limiter ends with its full capacity.
func TestVerdictCopiesReleaseSlotsOnceUnderContention(t *testing.T) {
	clock := ratelimittest.NewClock(ratelimittest.Epoch())
	wide := &countingStore{Store: memory.New(memory.WithClock(clock))}
	tight := &countingStore{Store: memory.New(memory.WithClock(clock))}
	l := ratelimit.NewRulesLimiter([]ratelimit.Rule{
		{Name: "wide", Limit: ratelimit.PerMinute(4), Algorithm: ratelimit.Concurrency, Key: ratelimit.Global(), Store: wide},
		{Name: "tight", Limit: ratelimit.PerMinute(3), Algorithm: ratelimit.Concurrency, Key: ratelimit.Global(), Store: tight},
	}, ratelimit.WithClock(clock))
	var inFlight, most atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 200 {
				v := l.Check(httptest.NewRequest("GET", "/", nil))
				if !v.Allowed() {
					continue
				}
				n := inFlight.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				inFlight.Add(-1)
				c := v
				var both sync.WaitGroup
				both.Go(v.Done)
				both.Go(func() { c.DoneStatus(200) })
				both.Wait()
			}
		})
	}
	wg.Wait()
	if m := most.Load(); m > 3 {
		t.Errorf("%d requests in flight at once; the tight rule allows 3", m)
	}
	for name, s := range map[string]*countingStore{"wide": wide, "tight": tight} {
		if tk, rt := s.taken.Load(), s.returned.Load(); tk != rt || tk == 0 {
			t.Errorf("store %s: %d units taken, %d given back; want every unit given back once", name, tk, rt)
		}
	}
	var held []ratelimit.Verdict
	for range 3 {
		v := l.Check(httptest.NewRequest("GET", "/", nil))
		if !v.Allowed() {
			t.Fatalf("after every Done: request %d denied; want the full capacity of 3", len(held)+1)
		}
		held = append(held, v)
	}
	if l.Check(httptest.NewRequest("GET", "/", nil)).Allowed() {
		t.Error("a fourth request admitted while three hold the tight rule's slots")
	}
	for _, v := range held {
		v.Done()
	}
}
