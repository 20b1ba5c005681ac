package ratelimit_test

import (
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
)

// funcClock is a Clock made of a function: its values cannot be compared.
type funcClock func() time.Time

func (f funcClock) Now() time.Time { return f() }

// offsetClock wraps another Clock: a struct whose type is comparable, while
// the Clock it holds may not be.
type offsetClock struct {
	ratelimit.Clock
	offset time.Duration
}

func (c offsetClock) Now() time.Time { return c.Clock.Now().Add(c.offset) }

// TestReloadableStoreWithAWrappedFuncClock: Reloadable.Store of adaptive
// rules whose clock is a comparable struct holding a func-typed Clock must
// not panic. sameSettings checks reflect.TypeOf(clock).Comparable(), true
// for the struct, then compares with ==, which panics at run time
// ("comparing uncomparable type") on the func inside: a reload takes the
// process down.
func TestReloadableStoreWithAWrappedFuncClock(t *testing.T) {
	clock := offsetClock{Clock: funcClock(time.Now)}
	build := func() *ratelimit.Limiter {
		return ratelimit.NewRulesLimiter([]ratelimit.Rule{
			{Name: "inflight", Key: ratelimit.Global(), Adaptive: fixedAdaptive(2)},
		}, ratelimit.WithClock(clock))
	}
	h := ratelimit.NewReloadable(build())
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("Reloadable.Store panicked: %v", p)
		}
	}()
	h.Store(build())
}
