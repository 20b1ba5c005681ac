package adaptive_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/ratelimit/adaptive"
)

// closeWindowAfter lets d pass (virtual time) and closes the window with
// a timed release, which Acquire hands out one in 2^shift.
func closeWindowAfter(l *adaptive.Limiter, d time.Duration) {
	time.Sleep(d)
	for closed := false; !closed; {
		tk, _ := l.Acquire(true)
		closed = tk.Timed()
		tk.Release(adaptive.SampleIgnore)
	}
}

// holdFor admits n requests at once, holds them for d and releases them
// all with sample.
func holdFor(l *adaptive.Limiter, n int, d time.Duration, sample adaptive.Sample) {
	held := make([]adaptive.Ticket, 0, n)
	for range n {
		tk, _ := l.Acquire(true)
		held = append(held, tk)
	}
	time.Sleep(d)
	for _, tk := range held {
		tk.Release(sample)
	}
}

// TestAdaptiveThinsSamplingWithinAWindow: a window whose rate is high from
// its start (the first one, or a surge) stops timing every request once it
// has sampled four times the target (1,024 outcomes by default), halving
// the sampling at each further 1,024 (so 5,000 requests end at one in 4),
// and its success count, estimated from samples taken at three samplings,
// is still the count of successes. In virtual time (testing/synctest).
func TestAdaptiveThinsSamplingWithinAWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := adaptive.New(adaptive.Config{Min: 1 << 20, Max: 1 << 20, Initial: 1 << 20})
		const n = 5000
		for range n {
			tk, _ := l.Acquire(true)
			tk.Release(adaptive.SampleSuccess)
		}
		if s := adaptive.SampleShift(l); s != 2 {
			t.Errorf("after %d successes in one window: sampling one in 2^%d, want 2^2", n, s)
		}
		closeWindowAfter(l, 100*time.Millisecond)
		if got := l.State().Successes; got < n*9/10 || got > n*11/10 {
			t.Errorf("the window's successes estimated at %d, want %d ± 10%%", got, n)
		}
	})
}

// TestAdaptiveSampledAbandonedRequestsStandForTheUnsampled: under Acquire's
// sampling (one in 2^shift timed), only a timed request abandoned by its
// caller can be told slow, a drop: each one counts for the 2^shift it
// stands for, so that a window of slow abandoned requests weighs as many
// drops as it had requests, as when every request was timed. In virtual
// time (testing/synctest).
func TestAdaptiveSampledAbandonedRequestsStandForTheUnsampled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := adaptive.New(adaptive.Config{Min: 1 << 20, Max: 1 << 20, Initial: 1 << 20})
		holdFor(l, 4000, 5*time.Millisecond, adaptive.SampleSuccess) // the minimum RTT, and sampling
		closeWindowAfter(l, 100*time.Millisecond)
		shift := adaptive.SampleShift(l)
		if shift < 2 || l.State().MinRTT == 0 {
			t.Fatalf("after a window of 4000 successes: shift %d, %+v; want sampling and a minimum RTT", shift, l.State())
		}
		const n = 1 << 14
		holdFor(l, n, 50*time.Millisecond, adaptive.SampleAbandoned) // ten times the minimum RTT: slow
		closeWindowAfter(l, 100*time.Millisecond)
		if d := l.State().Drops; d < n/2 || d > 2*n {
			t.Errorf("%d slow abandoned requests (one in 2^%d timed) counted as %d drops, want about %d", n, shift, d, n)
		}
	})
}

// TestAdaptiveSampledDropsStandForTheUnsampled: under Acquire's sampling
// (one in 2^shift timed), only the timed requests' outcomes are recorded,
// and each drop among them counts for the 2^shift it stands for: a window
// whose requests all failed counts about as many drops as it had
// requests, as when every request was timed. In virtual time
// (testing/synctest).
func TestAdaptiveSampledDropsStandForTheUnsampled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := adaptive.New(adaptive.Config{Min: 1 << 20, Max: 1 << 20, Initial: 1 << 20})
		holdFor(l, 4000, 5*time.Millisecond, adaptive.SampleSuccess) // a window of successes, for the sampling
		closeWindowAfter(l, 100*time.Millisecond)
		shift := adaptive.SampleShift(l)
		if shift < 2 {
			t.Fatalf("after a window of 4000 successes: shift %d; want sampling", shift)
		}
		const n = 1 << 14
		timed := 0
		for range n {
			tk, _ := l.Acquire(true)
			if tk.Timed() {
				timed++
			}
			tk.Release(adaptive.SampleDrop)
		}
		closeWindowAfter(l, 100*time.Millisecond)
		if timed == n {
			t.Fatal("every request was timed: nothing sampled out")
		}
		if d := l.State().Drops; d < n/2 || d > 2*n {
			t.Errorf("%d drops (one in 2^%d timed) counted as %d, want about %d", n, shift, d, n)
		}
	})
}
