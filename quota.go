package ratelimit

import (
	"fmt"
	"github.com/sluicehq/ratelimit/stores"
	"time"
)

// Quota is a calendar quota: a number of events per day, week or month,
// with windows that start at midnight in a time zone. Windows follow the
// calendar, so a day with a daylight-saving change is 23 or 25 hours long.
// Make one with Daily, Weekly or Monthly; the zero Quota is unset.
//
// Window bounds are computed from the limiter's clock (each instance's own,
// also with Redis), so keep instance clocks synchronised.
type Quota struct {
	n    int
	unit calendarUnit
	loc  *time.Location // nil means UTC
}

// calendarUnit is the length of a Quota's window.
type calendarUnit uint8

const (
	day  calendarUnit = iota + 1
	week              // starting on Monday
	month
)

// Daily returns a quota of n events per calendar day in loc (nil: UTC).
func Daily(n int, loc *time.Location) Quota { return Quota{n: n, unit: day, loc: loc} }

// Weekly returns a quota of n events per calendar week (from Monday) in loc.
func Weekly(n int, loc *time.Location) Quota { return Quota{n: n, unit: week, loc: loc} }

// Monthly returns a quota of n events per calendar month in loc.
func Monthly(n int, loc *time.Location) Quota { return Quota{n: n, unit: month, loc: loc} }

// IsZero reports whether q is unset.
func (q Quota) IsZero() bool { return q.unit == 0 }

// Validate reports whether q can be enforced: a quota made by Daily, Weekly
// or Monthly of 1 to 2^31-1 events. The error wraps ErrInvalidLimit.
func (q Quota) Validate() error {
	if q.unit == 0 || q.unit > month {
		return fmt.Errorf("%w: quota without a calendar window; use Daily, Weekly or Monthly", ErrInvalidLimit)
	}
	// The events of one window are counted as a limit of that many per window.
	if err := (Limit{Rate: q.n, Period: 24 * time.Hour}).Validate(); err != nil {
		return fmt.Errorf("ratelimit: quota: %w", err)
	}
	return nil
}

// quotaWindow returns the store request's limit and window for q at now:
// the window containing now and the bounds of its neighbours, so that a
// store on its own clock can pick the window that contains its time.
func quotaWindow(q Quota, now time.Time) (Limit, stores.Window) {
	start, end := q.Window(now)
	prev, _ := q.Window(start.Add(-1))
	_, next := q.Window(end)
	return Limit{Rate: q.n, Period: end.Sub(start)},
		stores.Window{Start: start.UnixNano(), End: end.UnixNano(), PrevStart: prev.UnixNano(), NextEnd: next.UnixNano()}
}

// Window returns the bounds [start, end) of the window containing t.
func (q Quota) Window(t time.Time) (start, end time.Time) {
	loc := q.loc
	if loc == nil {
		loc = time.UTC
	}
	t = t.In(loc)
	y, m, d := t.Date()
	switch q.unit {
	case week:
		d -= (int(t.Weekday()) + 6) % 7
		start = time.Date(y, m, d, 0, 0, 0, 0, loc)
		return start, time.Date(y, m, d+7, 0, 0, 0, 0, loc)
	case month:
		start = time.Date(y, m, 1, 0, 0, 0, 0, loc)
		return start, time.Date(y, m+1, 1, 0, 0, 0, 0, loc)
	default:
		start = time.Date(y, m, d, 0, 0, 0, 0, loc)
		return start, time.Date(y, m, d+1, 0, 0, 0, 0, loc)
	}
}

// quotaCache is the window a rule's quota last gave: every request of the
// same window (a whole day, for a daily quota) reuses it rather than
// working the calendar out again.
type quotaCache struct {
	q     Quota
	limit Limit
	win   stores.Window
}

// quotaWindow is quotaWindow for ru, through its cache: windows partition
// time, so the cached one is the one containing now whenever now falls
// inside it.
func (ru *rule) quotaWindow(q Quota, now time.Time) (Limit, stores.Window) {
	ns := now.UnixNano()
	if c := ru.window.Load(); c != nil && c.q == q && c.win.Start <= ns && ns < c.win.End {
		return c.limit, c.win
	}
	limit, win := quotaWindow(q, now)
	ru.window.Store(&quotaCache{q: q, limit: limit, win: win})
	return limit, win
}
