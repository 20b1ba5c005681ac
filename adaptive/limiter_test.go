package adaptive_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/ratelimit/adaptive"
	"github.com/sluicehq/ratelimit/ratelimittest"
)

// fillWindow admits n requests at t, releases them all at t+rtt with v, and
// returns t+rtt.
func fillWindow(tb testing.TB, l *adaptive.Limiter, t time.Time, n int, rtt time.Duration, v adaptive.Sample) time.Time {
	tb.Helper()
	var held []adaptive.Ticket
	for range n {
		tk, ok := l.AcquireAt(t, true)
		if ok {
			held = append(held, tk)
		}
	}
	for _, tk := range held {
		tk.ReleaseAt(t.Add(rtt), v)
	}
	return t.Add(rtt)
}

// TestAdaptiveWindowOfTimeoutsLowersLimit is the regression test for a
// controller that never backs off when every request of a window times
// out: whatever the limit, the learned minimum RTT, the in-flight level and
// the timeouts' duration (short ones that would look like a fast window
// included), a window holding only drops lowers the limit.
func TestAdaptiveWindowOfTimeoutsLowersLimit(t *testing.T) {
	for _, initial := range []int{2, 7, 20, 100, 1000} {
		for _, inflight := range []int{1, initial / 2, initial} {
			for _, rtt := range []time.Duration{time.Microsecond, 5 * time.Millisecond, 30 * time.Second} {
				l := adaptive.NewAt(adaptive.Config{Initial: initial, Max: 1000}, ratelimittest.Epoch())
				now := ratelimittest.Epoch()
				// Learn a minimum RTT and close a few healthy windows.
				for range 5 {
					now = fillWindow(t, l, now, max(inflight, 10), 5*time.Millisecond, adaptive.SampleSuccess)
					now = now.Add(100 * time.Millisecond)
				}
				before := l.State()
				now = fillWindow(t, l, now, max(inflight, 10), rtt, adaptive.SampleDrop)
				now = now.Add(time.Second)
				fillWindow(t, l, now, 1, 0, adaptive.SampleIgnore) // a release closes the window
				after := l.State()
				if before.Limit > 1 && after.Limit >= before.Limit {
					t.Errorf("initial %d, %d in flight, timeouts of %v: a window of only drops moved the limit %d -> %d",
						initial, inflight, rtt, before.Limit, after.Limit)
				}
				if after.Drops == 0 || after.Successes != 0 {
					t.Errorf("initial %d: the closed window holds %d drops and %d successes", initial, after.Drops, after.Successes)
				}
			}
		}
	}
}

// TestAdaptiveBoundsHoldUnderHostileInput: random verdicts, latencies and
// times (stepped back included) never take the limit out of [Min, Max] nor
// the in-flight count below zero, and never panic.
func TestAdaptiveBoundsHoldUnderHostileInput(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	l := adaptive.NewAt(adaptive.Config{Min: 3, Max: 40, Initial: 10, MinSamples: 2, Window: time.Millisecond}, ratelimittest.Epoch())
	now := ratelimittest.Epoch()
	var held []adaptive.Ticket
	for i := range 200_000 {
		now = now.Add(time.Duration(rng.Int64N(int64(2*time.Millisecond))) - time.Millisecond/2) // sometimes backwards
		if rng.IntN(2) == 0 {
			if tk, ok := l.AcquireAt(now, rng.IntN(3) > 0); ok {
				held = append(held, tk)
			}
		} else if len(held) > 0 {
			j := rng.IntN(len(held))
			held[j].ReleaseAt(now.Add(time.Duration(rng.Int64N(int64(time.Second)))-time.Second/4), adaptive.Sample(rng.IntN(3)))
			held = append(held[:j], held[j+1:]...)
		}
		st := l.State()
		if st.Limit < 3 || st.Limit > 40 || st.InFlight != len(held) {
			t.Fatalf("step %d: limit %d (bounds [3, 40]), in flight %d (held %d)", i, st.Limit, st.InFlight, len(held))
		}
	}
	if l.State().Windows == 0 {
		t.Fatal("no window ever closed: the test exercised nothing")
	}
}

// TestAdaptiveLowPriorityRejectedFirst: at the limit, non-critical requests
// may fill only LowPriorityShare of it, critical ones all of it.
func TestAdaptiveLowPriorityRejectedFirst(t *testing.T) {
	l := adaptive.NewAt(adaptive.Config{Min: 8, Max: 8, Initial: 8, LowPriorityShare: 0.5}, ratelimittest.Epoch())
	now := ratelimittest.Epoch()
	low := 0
	for {
		if _, ok := l.AcquireAt(now, false); !ok {
			break
		}
		low++
	}
	if low != 4 {
		t.Fatalf("%d low-priority requests admitted, want 4 (half of 8)", low)
	}
	crit := 0
	for {
		if _, ok := l.AcquireAt(now, true); !ok {
			break
		}
		crit++
	}
	if crit != 4 {
		t.Fatalf("after 4 low-priority requests, %d critical ones admitted, want 4", crit)
	}
}

// TestAdaptiveNeverAdmitsMoreThanTheLimit: concurrent acquirers never hold
// more slots than a fixed limit.
func TestAdaptiveNeverAdmitsMoreThanTheLimit(t *testing.T) {
	l := adaptive.New(adaptive.Config{Min: 5, Max: 5, Initial: 5})
	var holding, worst atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 2000 {
				tk, ok := l.Acquire(true)
				if !ok {
					continue
				}
				n := holding.Add(1)
				for w := worst.Load(); n > w && !worst.CompareAndSwap(w, n); w = worst.Load() {
				}
				holding.Add(-1)
				tk.Release(adaptive.SampleSuccess)
			}
		}()
	}
	wg.Wait()
	if w := worst.Load(); w > 5 || w == 0 {
		t.Fatalf("at most %d held at once, want 1..5", w)
	}
	if st := l.State(); st.InFlight != 0 {
		t.Fatalf("%d in flight after every release", st.InFlight)
	}
}

// TestAdaptiveRequestPathDoesNotAllocate: acquire and release allocate
// nothing, window closes included.
func TestAdaptiveRequestPathDoesNotAllocate(t *testing.T) {
	l := adaptive.NewAt(adaptive.Config{Window: time.Millisecond, MinSamples: 1}, ratelimittest.Epoch())
	now := ratelimittest.Epoch()
	allocs := testing.AllocsPerRun(1000, func() {
		now = now.Add(300 * time.Microsecond)
		tk, _ := l.AcquireAt(now, true)
		tk.ReleaseAt(now.Add(200*time.Microsecond), adaptive.SampleSuccess)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per acquire+release", allocs)
	}
	if l.State().Windows < 100 {
		t.Fatalf("only %d windows closed", l.State().Windows)
	}
	live := adaptive.New(adaptive.Config{})
	if allocs := testing.AllocsPerRun(1000, func() {
		tk, _ := live.Acquire(true)
		tk.Release(adaptive.SampleSuccess)
	}); allocs != 0 {
		t.Fatalf("%v allocations per Acquire+Release", allocs)
	}
}

// TestAdaptiveOnWindowReportsState: the hook sees every closed window with
// the limit, the minimum RTT and the sample RTT.
func TestAdaptiveOnWindowReportsState(t *testing.T) {
	var got []adaptive.State
	l := adaptive.NewAt(adaptive.Config{OnWindow: func(s adaptive.State) { got = append(got, s) }}, ratelimittest.Epoch())
	now := ratelimittest.Epoch()
	for range 3 {
		now = fillWindow(t, l, now, 20, 5*time.Millisecond, adaptive.SampleSuccess).Add(100 * time.Millisecond)
	}
	fillWindow(t, l, now, 1, 0, adaptive.SampleIgnore)
	if len(got) != 3 {
		t.Fatalf("OnWindow called %d times, want 3", len(got))
	}
	last := got[len(got)-1]
	if last.MinRTT < 4*time.Millisecond || last.MinRTT > 6*time.Millisecond || last.SampleRTT < 4*time.Millisecond || last.SampleRTT > 6*time.Millisecond {
		t.Fatalf("MinRTT %v, SampleRTT %v; want about 5ms", last.MinRTT, last.SampleRTT)
	}
	if last.Limit != l.State().Limit || last.Successes < 19 || last.Successes > 21 || last.Windows != 3 {
		t.Fatalf("last window state %+v", last)
	}
}

// TestAdaptiveConfigPanics: a configuration that cannot work panics with
// a "ratelimit:" message.
func TestAdaptiveConfigPanics(t *testing.T) {
	for name, a := range map[string]adaptive.Config{
		"min above max":   {Min: 10, Max: 5},
		"negative min":    {Min: -1},
		"initial outside": {Min: 5, Max: 10, Initial: 50},
		"tolerance":       {Tolerance: 1.01},
		"share":           {LowPriorityShare: 1.5},
		"window":          {Window: -time.Second},
		"huge window":     {Window: 1000 * time.Hour},
		"NaN tolerance":   {Tolerance: math.NaN()},
	} {
		func() {
			defer func() {
				msg, _ := recover().(string)
				if !strings.HasPrefix(msg, "ratelimit: ") {
					t.Errorf("%s: panic %q, want a ratelimit: message", name, msg)
				}
			}()
			adaptive.New(a)
		}()
	}
}

// TestAdaptiveTicketReleasedTwiceDoesNotPanic: misuse (a ticket released
// twice, the first requests' included) corrupts nothing beyond the count.
func TestAdaptiveTicketReleasedTwiceDoesNotPanic(t *testing.T) {
	l := adaptive.NewAt(adaptive.Config{}, ratelimittest.Epoch())
	for range 20 {
		tk, _ := l.AcquireAt(ratelimittest.Epoch(), true)
		tk.ReleaseAt(ratelimittest.Epoch().Add(time.Millisecond), adaptive.SampleSuccess)
		tk.ReleaseAt(ratelimittest.Epoch().Add(time.Millisecond), adaptive.SampleSuccess)
	}
	var zero adaptive.Ticket
	zero.Release(adaptive.SampleDrop)
	if st := l.State(); st.InFlight != 0 || st.Limit < 1 {
		t.Fatalf("state %+v", st)
	}
}

// TestAdaptiveSamplesAtHighRates: with tens of thousands of outcomes a
// window, latency is sampled (one in 2^shift) yet the window's latency,
// the estimated successes and the reaction to a queue are those of the
// whole traffic, and drops are counted in full.
func TestAdaptiveSamplesAtHighRates(t *testing.T) {
	const perWindow = 20000
	l := adaptive.NewAt(adaptive.Config{Initial: 25000, Max: 50000}, ratelimittest.Epoch())
	now := ratelimittest.Epoch()
	for range 5 {
		now = fillWindow(t, l, now, perWindow, 5*time.Millisecond, adaptive.SampleSuccess).Add(100 * time.Millisecond)
	}
	fillWindow(t, l, now, 1, 0, adaptive.SampleIgnore)
	st := l.State()
	shift := adaptive.SampleShift(l)
	if shift < 3 {
		t.Fatalf("sampling shift %d after windows of %d outcomes, want >= 3 (one in 8 or fewer timed)", shift, perWindow)
	}
	if st.Successes < perWindow*3/4 || st.Successes > perWindow*5/4 {
		t.Errorf("estimated successes %d, want about %d", st.Successes, perWindow)
	}
	if st.SampleRTT < 4500*time.Microsecond || st.SampleRTT > 5500*time.Microsecond || st.MinRTT > 5500*time.Microsecond {
		t.Errorf("SampleRTT %v, MinRTT %v, want about 5ms", st.SampleRTT, st.MinRTT)
	}
	before := st.Limit
	now = fillWindow(t, l, now.Add(time.Second), perWindow, 15*time.Millisecond, adaptive.SampleSuccess)
	fillWindow(t, l, now.Add(time.Second), 1, 0, adaptive.SampleIgnore)
	if got := l.State().Limit; got >= before {
		t.Errorf("a window three times slower than the minimum RTT moved the limit %d -> %d", before, got)
	}
	before = l.State().Limit
	now = fillWindow(t, l, now.Add(2*time.Second), perWindow, time.Millisecond, adaptive.SampleDrop)
	fillWindow(t, l, now.Add(time.Second), 1, 0, adaptive.SampleIgnore)
	if st := l.State(); st.Limit >= before || st.Drops != min(perWindow, before) {
		t.Errorf("a sampled window of only drops: limit %d -> %d, %d drops counted (want %d)", before, st.Limit, st.Drops, min(perWindow, before))
	}
}

// TestAdaptiveUnsampledRequestsSkipTheClock: once a window held enough
// outcomes, Acquire times about one request in 2^shift; the others never
// read the clock, and their outcomes are not recorded (the timed ones
// stand for them: TestAdaptiveSampledDropsStandForTheUnsampled). In
// virtual time (testing/synctest): Acquire reads the clock.
func TestAdaptiveUnsampledRequestsSkipTheClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := adaptive.New(adaptive.Config{Min: 1 << 20, Max: 1 << 20, Initial: 1 << 20})
		var held []adaptive.Ticket
		for range 4000 {
			tk, _ := l.Acquire(true)
			held = append(held, tk)
		}
		time.Sleep(5 * time.Millisecond)
		for _, tk := range held {
			tk.Release(adaptive.SampleSuccess)
		}
		time.Sleep(100 * time.Millisecond)
		for closed := false; !closed; { // a timed release closes the window of 4000
			tk, _ := l.Acquire(true) // (sampling thinned within it)
			closed = tk.Timed()
			tk.Release(adaptive.SampleSuccess)
		}
		shift := adaptive.SampleShift(l)
		if shift < 2 {
			t.Fatalf("shift %d after a window of 4000 outcomes, want >= 2", shift)
		}
		const n = 1 << 14
		timed, drops := 0, 0
		for range n {
			tk, _ := l.Acquire(true)
			if tk.Timed() {
				timed++
				tk.Release(adaptive.SampleIgnore)
				continue
			}
			if drops < 20 {
				drops++
				tk.Release(adaptive.SampleDrop)
				continue
			}
			tk.Release(adaptive.SampleSuccess)
		}
		if want := n >> shift; timed < want/2 || timed > want*2 {
			t.Errorf("%d of %d requests timed at shift %d, want about %d", timed, n, shift, want)
		}
		time.Sleep(100 * time.Millisecond)
		for closed := false; !closed; { // a timed release closes the window
			tk, _ := l.Acquire(true)
			closed = tk.Timed()
			tk.Release(adaptive.SampleIgnore)
		}
		if l.State().Drops != 0 {
			t.Errorf("%d drops counted, want none: the %d drops were of untimed requests", l.State().Drops, drops)
		}
	})
}

// TestAdaptiveKeepsControllingAfterTheClockStepsBack: the times given
// step back an hour (a wall clock set back, a test clock rewound); windows
// keep closing from the new times, so a run of windows holding only
// timeouts still lowers the limit, rather than the limit being frozen
// until the clock has caught up with the window's start.
func TestAdaptiveKeepsControllingAfterTheClockStepsBack(t *testing.T) {
	l := adaptive.NewAt(adaptive.Config{Initial: 100, Max: 1000}, ratelimittest.Epoch())
	now := ratelimittest.Epoch().Add(2 * time.Hour)
	for range 5 {
		now = fillWindow(t, l, now, 50, 5*time.Millisecond, adaptive.SampleSuccess)
		now = now.Add(100 * time.Millisecond)
	}
	before := l.State()
	now = now.Add(-time.Hour) // the clock steps back
	for range 5 {
		now = fillWindow(t, l, now, 50, time.Millisecond, adaptive.SampleDrop)
		now = now.Add(200 * time.Millisecond)
	}
	if after := l.State(); after.Limit >= before.Limit || after.Windows <= before.Windows {
		t.Fatalf("after the clock stepped back an hour, five windows of only drops: limit %d -> %d, windows %d -> %d; want the limit lowered",
			before.Limit, after.Limit, before.Windows, after.Windows)
	}
}

// TestAdaptiveRejectionsCountedFromEveryGoroutine: rejections counted at
// once by many goroutines (on their own stripes) all reach the window's
// State.Rejected, and the next window starts from none.
func TestAdaptiveRejectionsCountedFromEveryGoroutine(t *testing.T) {
	epoch := ratelimittest.Epoch()
	l := adaptive.NewAt(adaptive.Config{Min: 1, Max: 1, Initial: 1, MinSamples: 1, Window: time.Second}, epoch)
	held, ok := l.AcquireAt(epoch, true)
	if !ok {
		t.Fatal("the first request was rejected")
	}
	const goroutines, each = 8, 500
	var wg sync.WaitGroup
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				if _, ok := l.AcquireAt(epoch, true); ok {
					t.Error("admitted beyond a limit of 1")
					return
				}
			}
		}()
	}
	wg.Wait()
	held.ReleaseAt(epoch.Add(2*time.Second), adaptive.SampleSuccess) // closes the window
	if got := l.State().Rejected; got != goroutines*each {
		t.Fatalf("State().Rejected = %d, want %d", got, goroutines*each)
	}
	tk, _ := l.AcquireAt(epoch.Add(2*time.Second), true)
	tk.ReleaseAt(epoch.Add(4*time.Second), adaptive.SampleSuccess)
	if got := l.State().Rejected; got != 0 {
		t.Fatalf("the next window counted %d rejections, want 0", got)
	}
}

// TestAdaptiveIdleAt: a limiter is idle once it has had nothing in flight
// and closed no window for the longer of 10 Windows and MinRTTHorizon; a
// request in flight keeps it busy however long, and its release, which
// closes the overdue window, starts the wait again.
func TestAdaptiveIdleAt(t *testing.T) {
	epoch := ratelimittest.Epoch()
	l := adaptive.NewAt(adaptive.Config{Window: time.Second, MinRTTHorizon: 3 * time.Second}, epoch)
	if l.IdleAt(epoch.Add(10*time.Second - 1)) {
		t.Fatal("idle before 10 Windows")
	}
	if !l.IdleAt(epoch.Add(10 * time.Second)) {
		t.Fatal("not idle after 10 Windows without a request")
	}
	tk, _ := l.AcquireAt(epoch.Add(10*time.Second), true)
	if l.IdleAt(epoch.Add(100 * time.Second)) {
		t.Fatal("idle with a request in flight")
	}
	tk.ReleaseAt(epoch.Add(100*time.Second), adaptive.SampleSuccess)
	if l.IdleAt(epoch.Add(100 * time.Second)) {
		t.Fatal("idle right after a request")
	}
}
