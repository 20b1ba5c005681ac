package adaptive_test

import (
	"testing"
	"time"

	"github.com/sluicehq/ratelimit/adaptive"
	"github.com/sluicehq/ratelimit/ratelimittest"
)

// simAdaptive drives an Limiter in a simulation, on its times.
type simAdaptive struct{ l *adaptive.Limiter }

func (s simAdaptive) Acquire(now time.Time, critical bool) (func(time.Time, bool), bool) {
	t, ok := s.l.AcquireAt(now, critical)
	if !ok {
		return nil, false
	}
	return func(now time.Time, drop bool) {
		v := adaptive.SampleSuccess
		if drop {
			v = adaptive.SampleDrop
		}
		t.ReleaseAt(now, v)
	}, true
}

func (s simAdaptive) Limit() int { return s.l.State().Limit }

func newSimAdaptive(a adaptive.Config) simAdaptive {
	return simAdaptive{adaptive.NewAt(a, ratelimittest.Epoch())}
}

const (
	simWorkers = 20
	simService = 5 * time.Millisecond
)

func constant(n int) func(time.Duration) int { return func(time.Duration) int { return n } }

// baseSim is the workload: 20 workers, 5 ms service time, 200
// closed-loop clients.
func baseSim(seed uint64) ratelimittest.Simulation {
	return ratelimittest.Simulation{
		Workers: constant(simWorkers), Clients: constant(200),
		Service: simService, Jitter: 0.5, Timeout: time.Second,
		Duration: 20 * time.Second, Seed: seed,
	}
}

var simSeeds = []uint64{1, 2, 3, 4, 5}

// seeds returns the first n seeds, or only the first one under the race
// detector: the simulation runs on one goroutine, so the race detector
// adds nothing to it but time, and the other seeds run without it.
func seeds(n int) []uint64 {
	if raceEnabled {
		return simSeeds[:1]
	}
	return simSeeds[:n]
}

// TestAdaptiveStartTenTimesTooHigh: from a limit of 10C the limit is within
// [C, 2C] within 5 s, and from then on the median latency is at most 2.5x
// the service time with a goodput of at least 95% of capacity (and the
// limit never leaves [0.9C, 2C]: the sawtooth's lowest point is C, give or
// take the noise of the latency estimate).
func TestAdaptiveStartTenTimesTooHigh(t *testing.T) {
	for _, seed := range seeds(len(simSeeds)) {
		sim := baseSim(seed)
		res := sim.Run(newSimAdaptive(adaptive.Config{Initial: 10 * simWorkers}))
		entered := time.Duration(-1)
		for _, p := range res.Points {
			if p.Limit >= simWorkers && p.Limit <= 2*simWorkers {
				entered = p.T
				break
			}
		}
		if entered < 0 || entered > 5*time.Second {
			t.Fatalf("seed %d: the limit entered [%d, %d] at %v (want <= 5s)", seed, simWorkers, 2*simWorkers, entered)
		}
		at5 := res.Between(5*time.Second-res.Step, 5*time.Second, simService)
		st := res.Between(entered, sim.Duration, simService)
		t.Logf("seed %d: in [C, 2C] at %v (limit %d at 5s); then p50 %v, goodput %.1f%% of capacity, limit %d..%d",
			seed, entered, at5.MaxLimit, st.P50, 100*st.GoodputShare, st.MinLimit, st.MaxLimit)
		if at5.MaxLimit < simWorkers || at5.MaxLimit > 2*simWorkers {
			t.Errorf("seed %d: limit %d at 5s, want in [%d, %d]", seed, at5.MaxLimit, simWorkers, 2*simWorkers)
		}
		if st.MinLimit < simWorkers*9/10 || st.MaxLimit > 2*simWorkers {
			t.Errorf("seed %d: after settling the limit ranged %d..%d, want within [%d, %d]", seed, st.MinLimit, st.MaxLimit, simWorkers*9/10, 2*simWorkers)
		}
		if st.P50 > simService*5/2 {
			t.Errorf("seed %d: p50 %v > 2.5x the service time", seed, st.P50)
		}
		if st.GoodputShare < 0.95 {
			t.Errorf("seed %d: goodput %.1f%% of capacity, want >= 95%%", seed, 100*st.GoodputShare)
		}
	}
}

// TestAdaptiveCapacityHalves: when half the workers go away, the limit is
// at most twice the new capacity within 2 s.
func TestAdaptiveCapacityHalves(t *testing.T) {
	const at = 10 * time.Second
	for _, seed := range seeds(len(simSeeds)) {
		sim := baseSim(seed)
		sim.Workers = func(t time.Duration) int {
			if t >= at {
				return simWorkers / 2
			}
			return simWorkers
		}
		res := sim.Run(newSimAdaptive(adaptive.Config{}))
		st := res.Between(at+2*time.Second-res.Step, sim.Duration, simService) // from the step ending 2 s after
		t.Logf("seed %d: from 2s after the halving: limit %d..%d (new C %d), goodput %.1f%%", seed, st.MinLimit, st.MaxLimit, simWorkers/2, 100*st.GoodputShare)
		if st.MaxLimit > simWorkers {
			t.Errorf("seed %d: limit up to %d more than 2 s after capacity halved to %d", seed, st.MaxLimit, simWorkers/2)
		}
		if before := res.Between(at-5*time.Second, at, simService); before.MinLimit < simWorkers*3/4 {
			t.Errorf("seed %d: before the halving the limit fell to %d (C=%d)", seed, before.MinLimit, simWorkers)
		}
	}
}

// TestAdaptiveSteadyOverloadIsStable: under 60 s of steady overload the
// limit's max-min stays within 50% of its mean.
func TestAdaptiveSteadyOverloadIsStable(t *testing.T) {
	for _, seed := range seeds(3) {
		sim := baseSim(seed)
		sim.Duration = 65 * time.Second
		res := sim.Run(newSimAdaptive(adaptive.Config{}))
		st := res.Between(5*time.Second, sim.Duration, simService)
		spread := float64(st.MaxLimit-st.MinLimit) / st.MeanLimit
		t.Logf("seed %d: limit %d..%d, mean %.1f: spread %.0f%%; p50 %v goodput %.1f%%", seed, st.MinLimit, st.MaxLimit, st.MeanLimit, 100*spread, st.P50, 100*st.GoodputShare)
		if spread > 0.5 {
			t.Errorf("seed %d: the limit spans %.0f%% of its mean, want <= 50%%", seed, 100*spread)
		}
	}
}

// TestAdaptiveLightLoadIsNotRejected: with an offered concurrency of C/2
// for 60 s, at most 0.1% of requests are rejected: from the default start,
// from a start 10x too high, and after 10 s of overload pulled the limit
// down to C.
func TestAdaptiveLightLoadIsNotRejected(t *testing.T) {
	for _, tc := range []struct {
		name     string
		initial  int
		overload time.Duration
	}{{"default", 0, 0}, {"start-high", 10 * simWorkers, 0}, {"after-overload", 0, 10 * time.Second}} {
		sim := baseSim(1)
		sim.Clients = func(t time.Duration) int {
			if t < tc.overload {
				return 200
			}
			return simWorkers / 2
		}
		sim.Duration = tc.overload + 60*time.Second
		res := sim.Run(newSimAdaptive(adaptive.Config{Initial: tc.initial}))
		st := res.Between(tc.overload+res.Step, sim.Duration, simService)
		t.Logf("%s: rejected %d of %d (%.3f%%), limit %d..%d", tc.name, st.Rejected, st.Attempts, 100*st.RejectionRate, st.MinLimit, st.MaxLimit)
		if st.RejectionRate > 0.001 {
			t.Errorf("%s: %.3f%% of requests rejected, want <= 0.1%%", tc.name, 100*st.RejectionRate)
		}
	}
}

// TestAdaptiveRelearnsASlowerService: when every request becomes twice as
// slow for good (same workers), the limit first falls, then comes back
// as soon as a cut of the limit fails to bring latency down, and goodput is
// the new capacity again.
func TestAdaptiveRelearnsASlowerService(t *testing.T) {
	const at = 10 * time.Second
	sim := baseSim(1)
	sim.Duration = 40 * time.Second
	sim.Slowdown = func(t time.Duration) float64 {
		if t >= at {
			return 2
		}
		return 1
	}
	res := sim.Run(newSimAdaptive(adaptive.Config{}))
	low := res.Between(at, at+5*time.Second, simService)
	late := res.Between(at+3*time.Second, sim.Duration, 2*simService)
	t.Logf("after the slowdown: limit %d..%d; from 3 s later: limit %d..%d, p50 %v, goodput %.1f%% of the new capacity",
		low.MinLimit, low.MaxLimit, late.MinLimit, late.MaxLimit, late.P50, 100*late.GoodputShare)
	if late.MinLimit < simWorkers*3/4 || late.MaxLimit > 2*simWorkers {
		t.Errorf("3 s after the slowdown the limit ranged %d..%d, want within [%d, %d]", late.MinLimit, late.MaxLimit, simWorkers*3/4, 2*simWorkers)
	}
	if late.GoodputShare < 0.9 {
		t.Errorf("goodput %.1f%% of the new capacity", 100*late.GoodputShare)
	}
}

// TestAdaptiveConvergesWhileSampling: at 20,000 requests a second (100
// workers, 1,000 clients) only a sample of the requests is timed, and a
// start ten times too high still converges into [C, 2C] within 5 s with
// the median latency and goodput of the targets.
func TestAdaptiveConvergesWhileSampling(t *testing.T) {
	const workers = 100
	sim := baseSim(1)
	sim.Workers, sim.Clients = constant(workers), constant(10*workers)
	sim.Duration = 7 * time.Second
	l := newSimAdaptive(adaptive.Config{Initial: 10 * workers, Max: 20 * workers})
	res := sim.Run(l)
	if s := adaptive.SampleShift(l.l); s < 2 {
		t.Fatalf("sampling shift %d at %d requests a window: the test exercised no sampling", s, workers*20)
	}
	at5 := res.Between(5*time.Second-res.Step, 5*time.Second, simService)
	st := res.Between(5*time.Second, sim.Duration, simService)
	t.Logf("limit %d at 5 s; then %d..%d, p50 %v, goodput %.1f%%", at5.MaxLimit, st.MinLimit, st.MaxLimit, st.P50, 100*st.GoodputShare)
	if at5.MaxLimit < workers || at5.MaxLimit > 2*workers || st.MinLimit < workers*9/10 || st.MaxLimit > 2*workers {
		t.Errorf("limit %d at 5 s and %d..%d after, want within [%d, %d]", at5.MaxLimit, st.MinLimit, st.MaxLimit, workers, 2*workers)
	}
	if st.P50 > simService*5/2 || st.GoodputShare < 0.95 {
		t.Errorf("p50 %v, goodput %.1f%% of capacity", st.P50, 100*st.GoodputShare)
	}
}

// TestAdaptiveShedsLowPriorityFirst: under steady overload from 190
// non-critical clients, 10 critical ones (half the capacity) are rarely
// rejected: the non-critical ones take the rejections, and the limit
// still converges.
func TestAdaptiveShedsLowPriorityFirst(t *testing.T) {
	sim := baseSim(1)
	sim.Critical = func(client int) bool { return client < simWorkers/2 }
	var crit, low struct{ attempts, rejected int }
	lim := newSimAdaptive(adaptive.Config{})
	res := sim.Run(priorityCounter{lim, &crit.attempts, &crit.rejected, &low.attempts, &low.rejected})
	st := res.Between(5*time.Second, sim.Duration, simService)
	critRate := float64(crit.rejected) / float64(crit.attempts)
	lowRate := float64(low.rejected) / float64(low.attempts)
	t.Logf("rejected: critical %.1f%% of %d, non-critical %.1f%% of %d; limit %d..%d", 100*critRate, crit.attempts, 100*lowRate, low.attempts, st.MinLimit, st.MaxLimit)
	if !(lowRate > 0.5) || critRate > 0.1 {
		t.Errorf("critical requests rejected at %.1f%%, non-critical at %.1f%%: want the non-critical ones shed first", 100*critRate, 100*lowRate)
	}
	if st.MinLimit < simWorkers*9/10 || st.MaxLimit > 2*simWorkers {
		t.Errorf("limit %d..%d with priorities, want within [%d, %d]", st.MinLimit, st.MaxLimit, simWorkers*9/10, 2*simWorkers)
	}
}

// priorityCounter counts the attempts and rejections of each priority.
type priorityCounter struct {
	simAdaptive
	critAttempts, critRejected, lowAttempts, lowRejected *int
}

func (p priorityCounter) Acquire(now time.Time, critical bool) (func(time.Time, bool), bool) {
	release, ok := p.simAdaptive.Acquire(now, critical)
	attempts, rejected := p.lowAttempts, p.lowRejected
	if critical {
		attempts, rejected = p.critAttempts, p.critRejected
	}
	*attempts++
	if !ok {
		*rejected++
	}
	return release, ok
}
