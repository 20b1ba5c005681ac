package ratelimit_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores/memory"
)

func concurrencyLimiter(clock *ratelimittest.Clock, inFlight int) *ratelimit.Limiter {
	return ratelimit.NewRulesLimiter([]ratelimit.Rule{{Limit: ratelimit.Limit{Rate: inFlight, Period: time.Minute}, Key: ratelimit.Global(), Algorithm: ratelimit.Concurrency}}, ratelimit.WithClock(clock), ratelimit.WithStore(memory.New(memory.WithClock(clock))))
}

func admit(l *ratelimit.Limiter) (func(), bool) {
	return l.Admit(httptest.NewRecorder(), ratelimittest.NewRequest("GET", "/", ""))
}

// TestLostSlotExpiresWhileTrafficContinues: a slot whose holder never
// releases it (a handler that hung, a release that failed) is free again a
// Period after it was taken, although other requests keep taking and
// releasing slots on the same key all along.
func TestLostSlotExpiresWhileTrafficContinues(t *testing.T) {
	clock := ratelimittest.NewClock(ratelimittest.Epoch())
	l := concurrencyLimiter(clock, 2)
	if _, ok := admit(l); !ok { // lost: done is never called
		t.Fatal("first request denied")
	}
	for i := 1; i <= 12; i++ {
		clock.Advance(10 * time.Second)
		done1, ok1 := admit(l)
		if !ok1 {
			t.Fatalf("+%ds: one slot of two should be free", 10*i)
		}
		done2, ok2 := admit(l)
		if want := i >= 6; ok2 != want { // the lost slot expires at +60s
			t.Fatalf("+%ds: second concurrent request admitted=%v, want %v", 10*i, ok2, want)
		}
		done1()
		if ok2 {
			done2()
		}
	}
}

// TestLateReleaseFreesNoOtherSlot: a request that outlives its slot's Period
// releases, when it finishes, nothing: not the slot another request took
// since.
func TestLateReleaseFreesNoOtherSlot(t *testing.T) {
	clock := ratelimittest.NewClock(ratelimittest.Epoch())
	l := concurrencyLimiter(clock, 1)
	slow, ok := admit(l)
	if !ok {
		t.Fatal("first request denied")
	}
	clock.Advance(61 * time.Second) // the slow request's slot expired
	done, ok := admit(l)
	if !ok {
		t.Fatal("the expired slot was not free again")
	}
	slow() // finishes late
	if _, ok := admit(l); ok {
		t.Fatal("the late release freed the slot of the request still in flight")
	}
	done()
	if _, ok := admit(l); !ok {
		t.Fatal("the slot was not released")
	}
}

// TestLateReleaseFreesNoOtherSlotMultiRule: the same with two Concurrency
// rules on two stores (the multi-rule path releases each rule's slots by
// token too).
func TestLateReleaseFreesNoOtherSlotMultiRule(t *testing.T) {
	clock := ratelimittest.NewClock(ratelimittest.Epoch())
	slot := ratelimit.Limit{Rate: 1, Period: time.Minute}
	l := ratelimit.NewRulesLimiter([]ratelimit.Rule{
		{Name: "a", Limit: slot, Algorithm: ratelimit.Concurrency, Key: ratelimit.Global(), Store: memory.New(memory.WithClock(clock))},
		{Name: "b", Limit: slot, Algorithm: ratelimit.Concurrency, Key: ratelimit.Global(), Store: memory.New(memory.WithClock(clock))},
	}, ratelimit.WithClock(clock))
	slow, ok := admit(l)
	if !ok {
		t.Fatal("first request denied")
	}
	clock.Advance(61 * time.Second)
	done, ok := admit(l)
	if !ok {
		t.Fatal("the expired slots were not free again")
	}
	slow()
	if _, ok := admit(l); ok {
		t.Fatal("the late release freed the slots of the request still in flight")
	}
	done()
	if _, ok := admit(l); !ok {
		t.Fatal("the slots were not released")
	}
}

// TestFallbackSlotReleasedInFallbackStore: with the primary store down and
// a Fallback, a Concurrency slot taken in the fallback store is released
// there, not against the failing primary (where it leaked).
func TestFallbackSlotReleasedInFallbackStore(t *testing.T) {
	var releaseErrs atomic.Int32
	obs := ratelimit.ObserverFunc(func(e ratelimit.Event) {
		if e.Err != nil && strings.Contains(e.Err.Error(), "releasing") {
			releaseErrs.Add(1)
		}
	})
	h := ratelimit.NewRules([]ratelimit.Rule{{Limit: ratelimit.Limit{Rate: 2, Period: time.Minute}, Key: ratelimit.ByIP(), Algorithm: ratelimit.Concurrency, OnStoreError: ratelimit.FailurePolicy{Fallback: memory.New()}}}, ratelimit.WithStore(ratelimittest.FailingStore{Err: errStoreDown}), ratelimit.WithObserver(obs))(http.NotFoundHandler())
	for i := 1; i <= 4; i++ { // sequential: at most one in flight
		if code, _, _ := serve(h, ratelimittest.NewRequest("GET", "/", "")); code != http.StatusNotFound {
			t.Fatalf("request %d: %d with nothing in flight (release errors: %d)", i, code, releaseErrs.Load())
		}
	}
	if n := releaseErrs.Load(); n != 0 {
		t.Errorf("%d slot releases failed", n)
	}
}

// TestShadowSlotReleasedWhenEnforcedRuleDenies: a shadow Concurrency rule
// gives its slot back when an enforced rule denies the request.
func TestShadowSlotReleasedWhenEnforcedRuleDenies(t *testing.T) {
	var shadowSeen, shadowDenied atomic.Int32
	obs := ratelimit.ObserverFunc(func(e ratelimit.Event) {
		if e.Rule != "inflight" || e.Err != nil {
			return
		}
		shadowSeen.Add(1)
		if !e.Result.Allowed {
			shadowDenied.Add(1)
		}
	})
	h := ratelimit.NewRules([]ratelimit.Rule{
		{Name: "ip", Limit: ratelimit.PerHour(1), Key: ratelimit.ByIP()},
		{Name: "inflight", Limit: ratelimit.Limit{Rate: 2, Period: time.Hour}, Algorithm: ratelimit.Concurrency, Key: ratelimit.ByIP(), Shadow: true},
	}, ratelimit.WithObserver(obs))(http.NotFoundHandler())
	for i := 1; i <= 5; i++ { // sequential; never more than 1 in flight
		want := http.StatusTooManyRequests
		if i == 1 {
			want = http.StatusNotFound
		}
		if code, _, _ := serve(h, ratelimittest.NewRequest("GET", "/", "")); code != want {
			t.Fatalf("request %d: %d, want %d", i, code, want)
		}
	}
	if shadowSeen.Load() == 0 {
		t.Fatal("the shadow rule was never reported")
	}
	if n := shadowDenied.Load(); n > 0 {
		t.Errorf("the shadow rule denied %d requests with at most one in flight: its slots leaked", n)
	}
}

// TestSlotsHeldAfterBatchReturnedToPool: with several rules on two stores,
// done may run long after the request's batch went back to the pool; the
// slots it releases are its own, concurrent admissions never exceed the
// smallest cap, and once every request is done the slots are free.
func TestSlotsHeldAfterBatchReturnedToPool(t *testing.T) {
	l := ratelimit.NewRulesLimiter([]ratelimit.Rule{
		{Name: "c", Limit: ratelimit.Limit{Rate: 4, Period: time.Minute}, Algorithm: ratelimit.Concurrency, Key: ratelimit.Global()},
		{Name: "c2", Limit: ratelimit.Limit{Rate: 3, Period: time.Minute}, Algorithm: ratelimit.Concurrency, Key: ratelimit.Global(), Store: memory.New()},
		{Name: "g", Limit: ratelimit.PerSecond(1000000), Key: ratelimit.ByIP()},
		{Name: "s", Limit: ratelimit.PerSecond(5), Key: ratelimit.ByIP(), Shadow: true},
	})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var dones []func()
	for i := range 200 {
		wg.Go(func() {
			done, ok := l.Admit(httptest.NewRecorder(), ratelimittest.NewRequest("GET", "/", fmt.Sprintf("10.0.0.%d:1", i%250)))
			if ok { // held until every request has been decided
				mu.Lock()
				dones = append(dones, done)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(dones) == 0 || len(dones) > 3 {
		t.Errorf("%d requests held slots at once, want 1 to 3 (the smaller cap)", len(dones))
	}
	for _, d := range dones {
		d()
	}
	for i := range 3 {
		if _, ok := admit(l); !ok {
			t.Fatalf("slot %d not released", i+1)
		}
	}
}

// TestHotKeySlotsComeBackThroughTheMiddleware: requests of one key (which
// its store makes hot) from many goroutines at once, round after round,
// the admitted ones held by their handlers until the limit is reached and
// one of them panicking now and then: each round admits exactly the limit,
// never more at once, so every slot of the round before came back, its
// panicking holder's too.
func TestHotKeySlotsComeBackThroughTheMiddleware(t *testing.T) {
	const rate, workers, rounds = 3, 8, 150
	c := ratelimit.Rule{Name: "inflight", Algorithm: ratelimit.Concurrency, Limit: ratelimit.Limit{Rate: rate, Period: time.Hour}, Key: ratelimit.ByIP()}
	var inFlight, peak, admitted atomic.Int64
	var full chan struct{} // closed once the round admitted the limit
	var once *sync.Once
	var round atomic.Int64
	h := ratelimit.NewRules([]ratelimit.Rule{c})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		for m := peak.Load(); n > m && !peak.CompareAndSwap(m, n); m = peak.Load() {
		}
		if admitted.Add(1) == rate {
			once.Do(func() { close(full) })
		}
		<-full // every slot of the round is held
		inFlight.Add(-1)
		w.WriteHeader(http.StatusOK)
		if round.Load()%4 == 0 && n == 1 {
			panic("handler failed")
		}
	}))
	serve := func(results chan<- int) {
		defer func() { recover() }()
		w := httptest.NewRecorder()
		defer func() { results <- w.Code }()
		h.ServeHTTP(w, ratelimittest.NewRequest("GET", "/", ""))
	}
	for i := range rounds {
		round.Store(int64(i))
		full, once = make(chan struct{}), new(sync.Once)
		admitted.Store(0)
		results := make(chan int, workers)
		for range workers {
			go serve(results)
		}
		denied := 0
		for range workers {
			switch code := <-results; code {
			case http.StatusOK:
			case http.StatusTooManyRequests:
				if denied++; denied > workers-rate { // a slot of an earlier round was not returned
					t.Errorf("round %d: %d of %d requests denied, limit %d", i, denied, workers, rate)
					once.Do(func() { close(full) })
				}
			default:
				t.Fatalf("round %d: status %d", i, code)
			}
		}
		if t.Failed() {
			return
		}
	}
	if m := peak.Load(); m > rate {
		t.Fatalf("%d requests in their handlers at once, limit %d", m, rate)
	}
}
