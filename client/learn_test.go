package ratelimitclient

import (
	"net/http"
	"testing"
	"time"
)

// throttleAt feeds l a throttle whose Date is the whole second date, with
// a Retry-After of retry seconds, arriving at now.
func throttleAt(l *learner, c *serverClock, date time.Time, retry int64, now time.Time) reading {
	h := http.Header{"Date": {date.UTC().Format(http.TimeFormat)}}
	rd, _ := l.throttled(c, h, now, time.Duration(retry)*time.Second, now)
	return rd
}

// TestLearnerReadsFixedWindowQuota: a server counting 10 a second in
// windows aligned on its clock, and sending only Date and Retry-After,
// throttles a client sending 20 a second after its 10th send in a window;
// the Retry-After of a second, rounded up, ends 800 ms into the next
// window, whose rest the client does not spend. The sends accepted between
// the throttles are of two windows, 14 of them; the learner reads the quota
// of the windows both throttles came in (10 a second), not 14 over the 1.7 s
// between them.
func TestLearnerReadsFixedWindowQuota(t *testing.T) {
	var c serverClock
	var l learner
	t0 := time.Unix(1_000_000, 0)
	send := func(at time.Time, n int, every time.Duration) time.Time {
		for range n {
			l.accepted(at, at.Truncate(time.Second))
			at = at.Add(every)
		}
		return at
	}
	// The first window: 10 accepted from 0.3 s, the 11th refused at 0.8 s.
	end := send(t0.Add(300*time.Millisecond), 10, 50*time.Millisecond)
	if rd := throttleAt(&l, &c, t0, 1, end); rd.rate != 0 {
		t.Fatalf("first throttle read %+v; want nothing", rd)
	}
	// Blocked until 1.8 s: 4 in what is left of the window [1 s, 2 s), the
	// 10 of [2 s, 3 s), the 11th refused at 2.5 s.
	at := send(t0.Add(1800*time.Millisecond), 4, 50*time.Millisecond)
	at = send(at, 10, 50*time.Millisecond)
	rd := throttleAt(&l, &c, t0.Add(2*time.Second), 1, at)
	if !rd.fixed || rd.quota != 10 || rd.window != 1 || rd.rate != 10 {
		t.Fatalf("read %+v; want 10 in windows of 1 s", rd)
	}
}

// TestLearnerReadsBucketRate: a bucket of 10 refilling 10 a second,
// drained by a client sending 20 a second, throttles it when empty; after
// a Retry-After of a second it has refilled 10 and refills 10 more while the
// client drains it again over a second: 20 accepted in the two seconds
// between the throttles, a rate of 10 (less the learner's margin).
func TestLearnerReadsBucketRate(t *testing.T) {
	var c serverClock
	var l learner
	t0 := time.Unix(1_000_000, 0)
	throttleAt(&l, &c, t0, 1, t0.Add(400*time.Millisecond))
	at := t0.Add(1400 * time.Millisecond)
	for range 20 {
		l.accepted(at, at.Truncate(time.Second))
		at = at.Add(50 * time.Millisecond)
	}
	rd := throttleAt(&l, &c, at.Truncate(time.Second), 1, t0.Add(2400*time.Millisecond))
	if rd.fixed || rd.rate < 9.5 || rd.rate > 10 {
		t.Fatalf("read %+v; want a rate of about 10 a second, not windows", rd)
	}
}

// TestScheduleFillsWindowAfterThrottle: a schedule of 10 in windows of a
// second, whose server clock is known to within 100 ms, resuming 700 ms
// into a window (a Retry-After rounded up to a whole second) sends the
// window's 10 in what is left of it, and then 10 in each window: however
// the server's clock is within the bounds, no window gets more than 10.
func TestScheduleFillsWindowAfterThrottle(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	o := offset{lo: -50 * time.Millisecond, hi: 50 * time.Millisecond}
	s := schedule{quota: 10, window: time.Second, start: t0, left: 10}
	at := t0.Add(700 * time.Millisecond)
	perWindow := map[int64]int{}
	for range 30 {
		slot := s.take(at, o)
		if slot.Before(at) {
			t.Fatalf("slot %v before %v", slot, at)
		}
		// On the server's clock the send lands anywhere in [slot+lo,
		// slot+hi): one that may land in either of two windows counts in
		// both (no Date is fed back here to tell which).
		early, late := slot.Add(o.lo).Unix(), slot.Add(o.hi-1).Unix()
		perWindow[early-t0.Unix()]++
		if late != early {
			perWindow[late-t0.Unix()]++
		}
		at = slot
	}
	for w, n := range perWindow {
		if n > 10 {
			t.Errorf("window %d got %d sends; want at most 10", w, n)
		}
	}
	if perWindow[0] != 10 {
		t.Errorf("the window resumed in got %d sends; want its 10", perWindow[0])
	}
}

// TestScheduleCountsUnplacedSendsInBothWindows: with the server's clock
// known only to within 300 ms, sends near a window's end may land in the
// next one: they are counted in both, and the next window gets back those
// whose Date shows they landed in the first.
func TestScheduleCountsUnplacedSendsInBothWindows(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	o := offset{lo: 0, hi: 300 * time.Millisecond}
	s := schedule{quota: 10, window: time.Second, start: t0, left: 10}
	var slots []time.Time
	at := t0.Add(600 * time.Millisecond) // the window surely ends at 700 ms, perhaps at 1 s
	for range 10 {
		slot := s.take(at, o)
		slots = append(slots, slot)
		at = slot
	}
	unsure := 0
	for _, sl := range slots {
		if !sl.Before(t0.Add(700 * time.Millisecond)) {
			unsure++
		}
	}
	if unsure == 0 || s.spill != int64(unsure) {
		t.Fatalf("%d sends after the window surely ended, spill %d; want them counted in the next window too", unsure, s.spill)
	}
	// The server's clock was in fact the client's: every send landed in
	// the first window, and the second gets all 10 back.
	for _, sl := range slots {
		s.landed(sl, sl.Truncate(time.Second))
	}
	next := s.take(t0.Add(time.Second), o)
	if s.left != 9 {
		t.Fatalf("after the first send of the next window (at %v), %d left; want 9", next.Sub(t0), s.left)
	}
}
