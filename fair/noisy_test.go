package fair_test

import (
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/ratelimit/fair"
)

// The noisy-tenant proof: one flow offering ten times its fair share does
// not make nine light flows wait much longer than they would alone.

// scheduling is how the noisy-tenant scenario's level is set up.
type scheduling int

const (
	fairQueuing scheduling = iota // one level, 64 queues, the flows fair-queued
	oneFIFO                       // one level in one queue: first come, first served
	// lightFirst puts the light flows in a level of their own, in one
	// FIFO queue, above the loud flow's: strict priority, what no fair
	// scheduler can beat without preempting the loud flow's requests.
	lightFirst
)

// noisyTenant runs one flow offering 10x its fair share and 9 flows at
// 0.5x on a saturated level of the given seats (or the light flows alone).
func noisyTenant(seed uint64, seats int, fixed bool, s scheduling, withElephant bool) []simOut {
	capacity := float64(seats) * float64(time.Second/simSvc)
	share := capacity / 10
	loud, light := "l", "l"
	cfg := fair.Config{Seats: seats, Levels: []fair.Level{{Name: "l", Shares: 1}}, MaxWait: time.Second}
	switch s {
	case oneFIFO:
		cfg.Levels[0].Queues, cfg.Levels[0].HandSize, cfg.Levels[0].QueueLength = 1, 1, 400
	case lightFirst:
		loud, light = "loud", "light"
		cfg.Levels = []fair.Level{{Name: "light", Shares: 9, Queues: 1, HandSize: 1, QueueLength: 400}, {Name: "loud", Shares: 1}}
	}
	var flows []simFlow
	if withElephant {
		flows = append(flows, simFlow{level: loud, flow: "elephant", rate: 10 * share, svc: simSvc, fixed: fixed})
	}
	for i := range 9 {
		flows = append(flows, simFlow{level: light, flow: fmt.Sprintf("mouse%d", i), rate: share / 2, svc: simSvc, fixed: fixed})
	}
	return simulate(cfg, arrivals(seed, noisyDur, flows...))
}

const noisyDur = 20 * time.Second

func isMouse(o simOut) bool { return strings.HasPrefix(o.flow, "mouse") }

// pooled runs the scenario over seeds seeds: one run's p99 rests on a few
// dozen waits.
func pooled(seeds uint64, seats int, fixed bool, s scheduling, withElephant bool) []simOut {
	var out []simOut
	for seed := range seeds {
		out = append(out, noisyTenant(7+seed, seats, fixed, s, withElephant)...)
	}
	return out
}

// The light flows keep >= 99% of their requests and a p99 wait within 2x
// of their p99 alone, on 1, 2 and 4 seats.
func TestShieldsLightFlowsFromANoisyTenant(t *testing.T) {
	cases := []struct {
		seats int
		fixed bool
	}{
		{1, true}, {1, false}, {2, false}, {4, false},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("seats=%d/fixed=%v", c.seats, c.fixed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				alone := summarize(pooled(5, c.seats, c.fixed, fairQueuing, false), isMouse)
				out := pooled(5, c.seats, c.fixed, fairQueuing, true)
				mice, el := summarize(out, isMouse), summarize(out, byFlow("elephant"))
				t.Logf("light flows alone: p99 wait %v; with the elephant: %.2f%% admitted, p99 wait %v (%.2fx); elephant %.1f%% admitted (%d 429, %d 503)",
					alone.quantile(0.99), 100*mice.availability(), mice.quantile(0.99),
					float64(mice.quantile(0.99))/float64(alone.quantile(0.99)), 100*el.availability(), el.s429, el.s503)
				if mice.availability() < 0.99 {
					t.Errorf("light flows admitted %.4f, want >= 0.99", mice.availability())
				}
				if p, base := mice.quantile(0.99), alone.quantile(0.99); base == 0 || p > 2*base {
					t.Errorf("light flows' p99 wait %v, want <= 2 x %v (their p99 alone)", p, base)
				}
				if el.availability() > 0.75 {
					t.Errorf("the elephant got %.2f of its 10x share admitted; the scenario is not saturated", el.availability())
				}
			})
		})
	}
}

// With 8 seats the light flows alone seldom wait (p99 about 2 ms), while
// beside a loud flow that holds every free seat they wait for the next
// departure: a scheduler that does not preempt cannot do better than
// serving them first, in order of arrival (lightFirst). That floor is
// about 4x their p99 alone; fair queuing stays within 15% of it.
func TestLightFlowsWaitNoLongerThanUnderStrictPriority(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const seats = 8
		alone := summarize(pooled(3, seats, false, fairQueuing, false), isMouse).quantile(0.99)
		floor := summarize(pooled(3, seats, false, lightFirst, true), isMouse).quantile(0.99)
		got := summarize(pooled(3, seats, false, fairQueuing, true), isMouse).quantile(0.99)
		t.Logf("light flows' p99 wait: alone %v, light first (the floor) %v (%.2fx), fair queuing %v (%.2fx)",
			alone, floor, float64(floor)/float64(alone), got, float64(got)/float64(alone))
		if got > floor+floor*15/100 {
			t.Errorf("fair queuing p99 %v, want within 15%% of the strict-priority floor %v", got, floor)
		}
		if floor <= 2*alone {
			t.Errorf("floor %v within 2x of %v alone: the scenario does not show the floor", floor, alone)
		}
	})
}

// Without fair queuing (one FIFO queue), the same light flows are not
// shielded: this is what the fair queues buy, and the proof that the
// scenario above can fail.
func TestFIFOWouldNotShieldLightFlows(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		alone := summarize(noisyTenant(7, 4, false, oneFIFO, false), isMouse)
		mice := summarize(noisyTenant(7, 4, false, oneFIFO, true), isMouse)
		t.Logf("FIFO: light flows %.2f%% admitted, p99 wait %v (alone %v)", 100*mice.availability(), mice.quantile(0.99), alone.quantile(0.99))
		if mice.availability() >= 0.99 && mice.quantile(0.99) <= 2*alone.quantile(0.99) {
			t.Errorf("FIFO met the fairness bounds: the noisy-tenant scenario does not discriminate")
		}
	})
}
