package ratelimitclient

import "time"

// schedule sends a fixed window's quota in each window of a server that
// counts in fixed windows aligned on its clock, once the adaptive mode has
// read the quota and the window (see learn.go): what is left of each
// window's quota is spread evenly over what is left of it.
//
// Sending at the window's average rate from anywhere would keep within the
// quota too, but not fill the window after a throttle: Retry-After is
// rounded up to whole seconds, so a throttle near the end of a window of a
// second blocks until near the end of the next, and the average rate from
// there fits what is left of it. A schedule gives that window its whole
// quota in what is left.
//
// The windows are placed on the client's clock by the bounds the server's
// Date fields leave on how far its clock is off. A send made where the
// bounds do not tell which of two windows it falls in is counted in both;
// its response's Date then tells, and gives the later window its send back.
type schedule struct {
	quota  int64
	window time.Duration
	start  time.Time // the current window's start, on the server's clock
	left   int64     // sends left in it
	last   time.Time // the slot of the latest send, on the client's clock
	spill  int64     // sends counted in the next window too
	owed   int64     // sends counted in the previous window too, not yet shown to be its
	from   time.Time // the sends counted in two windows were made from here
	to     time.Time // to here, on the client's clock
}

// on reports whether the schedule is in use.
func (s *schedule) on() bool { return s.quota > 0 }

// take returns the slot of a send that may go at at, no earlier, and counts
// it; o bounds how far the server's clock is ahead of the client's. The
// caller takes from a copy and keeps it if the send goes ahead.
func (s *schedule) take(at time.Time, o offset) time.Time {
	slot := at
	for {
		// The current window is certainly on the server's clock from
		// start-lo to start+window-hi of the client's, and may be until
		// start+window-lo, where the next certainly begins.
		begin := s.start.Add(-o.lo)
		sure, end := s.start.Add(s.window-o.hi), s.start.Add(s.window-o.lo)
		if !slot.Before(end) {
			n := 1 + int64(slot.Sub(end)/s.window)
			s.left, s.owed = s.quota, 0
			if n == 1 {
				s.left, s.owed = s.quota-s.spill, s.spill
			}
			s.start, s.spill = s.start.Add(time.Duration(n)*s.window), 0
			continue
		}
		if s.left <= 0 {
			slot = end
			continue
		}
		if !s.last.Before(begin) {
			// What is left of the quota, spread over what is left of
			// the window.
			if next := s.last.Add(end.Sub(s.last) / time.Duration(s.left+1)); next.After(slot) {
				slot = next
				continue
			}
		}
		s.left--
		s.last = slot
		if !slot.Before(sure) {
			if s.spill == 0 {
				s.from, s.to = sure, end
			}
			s.spill++
		}
		return slot
	}
}

// landed notes that a send made at sent was answered with the Date date:
// a send counted in two windows gives the later its send back when the Date
// shows it came in the earlier.
func (s *schedule) landed(sent, date time.Time) {
	if !s.on() || date.IsZero() || sent.Before(s.from) || !sent.Before(s.to) {
		return
	}
	switch {
	case s.spill > 0 && date.Before(s.start.Add(s.window)):
		s.spill-- // the next window has not begun counting it
	case s.owed > 0 && date.Before(s.start):
		s.owed--
		s.left++
	}
}
