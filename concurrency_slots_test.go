package ratelimit_test

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores/memory"
)

func concurrencyLimiter(clock *ratelimittest.Clock, inFlight int) *ratelimit.Limiter {
	return ratelimit.NewLimiter(ratelimit.Limit{Rate: inFlight, Period: time.Minute}, ratelimit.Global(),
		ratelimit.WithAlgorithm(ratelimit.Concurrency), ratelimit.WithClock(clock),
		ratelimit.WithStore(memory.New(memory.WithClock(clock))))
}

func admit(l *ratelimit.Limiter) (func(), bool) {
	return l.Admit(httptest.NewRecorder(), ratelimittest.NewRequest("GET", "/", ""))
}

// TestLostSlotExpiresWhileTrafficContinues: a slot whose holder never
// releases it (a handler that hung, a release that failed) is free again a
// Period after it was taken, although other requests keep taking and
// releasing slots on the same key all along.
func TestLostSlotExpiresWhileTrafficContinues(t *testing.T) {
	clock := ratelimittest.NewClock(ratelimittest.Epoch)
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
	clock := ratelimittest.NewClock(ratelimittest.Epoch)
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
	clock := ratelimittest.NewClock(ratelimittest.Epoch)
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
