package ratelimit

import (
	"testing"
	"time"

	"github.com/sluicehq/ratelimit/stores/memory"
)

// TestEveryMemoryStoreTakesTheDirectPath: a store given with WithStore,
// sized or not, is the same in-process store as the default one and runs
// on the same direct path; a README example that sizes its store must not
// pay for it on every request.
func TestEveryMemoryStoreTakesTheDirectPath(t *testing.T) {
	for name, opts := range map[string][]Option{
		"default":            nil,
		"memory.New()":       {WithStore(memory.New())},
		"sized memory store": {WithStore(memory.New(memory.WithMaxKeys(10_000)))},
		"with its own clock": {WithStore(memory.New(memory.WithClock(fixedClock{})))},
	} {
		l := NewLimiter(PerSecond(10), ByIP(), opts...)
		if l.rules[0].fast == nil {
			t.Errorf("%s: the rule does not take the direct path", name)
		}
	}
}

// TestStepsStayOnTheDirectPath: an observer, a shadow rule and pacing are
// steps of the direct path (TestDirectPathObservesAsTheGeneralPath checks
// that observers see what the general path shows them; the pace tests run
// on the direct path).
func TestStepsStayOnTheDirectPath(t *testing.T) {
	observed := WithObserver(ObserverFunc(func(Event) {}))
	for name, l := range map[string]*Limiter{
		"observed":        NewLimiter(PerSecond(10), ByIP(), observed),
		"shadow":          NewRulesLimiter([]Rule{{Name: "s", Limit: PerSecond(10), Key: ByIP(), Shadow: true}}),
		"observed shadow": NewRulesLimiter([]Rule{{Name: "s", Limit: PerSecond(10), Key: ByIP(), Shadow: true}}, observed),
		"paced":           NewRulesLimiter([]Rule{{Name: "p", Limit: PerSecond(10), Key: ByIP(), Pace: Pace{MaxDelay: time.Second}}}),
		"observed paced":  NewRulesLimiter([]Rule{{Name: "p", Limit: PerSecond(10), Key: ByIP(), Pace: Pace{MaxDelay: time.Second}}}, observed),
	} {
		if l.direct() == nil {
			t.Errorf("%s: the rule does not take the direct path", name)
		}
	}
}

// TestAllowTakesTheDirectPath: Allow on a limiter of one rule on the
// in-process store runs the rule's prepared check, as the middleware does,
// with the same decisions as the general path (a twin on a wrapped store).
// TestAllowAllocatesNothing counts its allocations.
func TestAllowTakesTheDirectPath(t *testing.T) {
	clock := fixedClock{time.Unix(1_700_000_000, 0)}
	l := NewLimiter(PerMinute(3), ByIP(), WithClock(clock))
	twin := NewLimiter(PerMinute(3), ByIP(), WithClock(clock), WithStore(struct{ Store }{memory.New(memory.WithClock(clock))}))
	if l.direct() == nil || twin.direct() != nil {
		t.Fatal("the limiters do not take the paths compared")
	}
	ctx := t.Context()
	for i := range 5 {
		got, err := l.Allow(ctx, "k")
		want, werr := twin.Allow(ctx, "k")
		if got != want || err != nil || werr != nil {
			t.Fatalf("Allow %d: direct %+v, %v; general %+v, %v", i+1, got, err, want, werr)
		}
	}
}
