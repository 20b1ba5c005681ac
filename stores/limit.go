package stores

import (
	"fmt"
	"time"
)

// maxRatePerSecond is the fastest rate a Limit may describe, one event per
// nanosecond: faster limits cannot be enforced with nanosecond clocks.
const maxRatePerSecond = 1e9

// Limit describes how many events may happen and how fast.
//
// Rate events are allowed per Period on average, and at most Burst at once.
// A zero Burst means Rate. The zero Limit is invalid; package ratelimit
// builds one with PerSecond, PerMinute, PerHour, PerDay or ParseLimit,
// optionally followed by WithBurst.
type Limit struct {
	Rate   int           // events per Period
	Period time.Duration // the period over which Rate applies
	Burst  int           // most events at once; 0 means Rate
}

// WithBurst returns a copy of l that allows up to n events at once.
func (l Limit) WithBurst(n int) Limit {
	l.Burst = n
	return l
}

// Capacity is the number of events the Limit allows at once: Burst, or Rate
// when Burst is zero.
func (l Limit) Capacity() int {
	if l.Burst == 0 {
		return l.Rate
	}
	return l.Burst
}

// Interval is the time one event takes to replenish, Period/Rate, rounded up
// to the nanosecond so that the limit is never exceeded.
func (l Limit) Interval() time.Duration {
	if l.Rate <= 0 {
		return 0
	}
	return (l.Period + time.Duration(l.Rate) - 1) / time.Duration(l.Rate)
}

// Validate reports whether l can be enforced. It returns an error wrapping
// ErrInvalidLimit for a non-positive Rate or Period, a negative Burst, a Rate
// or Burst above 2^31-1, a rate above one event per nanosecond (10^9 per
// second), a Period over 50 years, or a Limit whose empty bucket would take
// longer than 2^62 nanoseconds (about 146 years) to refill.
func (l Limit) Validate() error {
	if p := l.problem(); p != "" {
		return fmt.Errorf("%w: %s", ErrInvalidLimit, p)
	}
	return nil
}

// problem says what makes l invalid (see Validate), or "" when l is valid.
func (l Limit) problem() string {
	switch {
	case l.Rate <= 0:
		return fmt.Sprintf("rate %d must be positive", l.Rate)
	case l.Period <= 0:
		return fmt.Sprintf("period %v must be positive", l.Period)
	case l.Burst < 0:
		return fmt.Sprintf("burst %d must not be negative", l.Burst)
	case l.Rate > MaxCount || l.Burst > MaxCount:
		return fmt.Sprintf("%d events exceeds the maximum of %d", max(l.Rate, l.Burst), MaxCount)
	case time.Duration(l.Rate) > l.Period: // more than one event per nanosecond
		return fmt.Sprintf("%d per %v is faster than %g per second", l.Rate, l.Period, maxRatePerSecond)
	case l.Period > maxPeriod:
		return fmt.Sprintf("period %v is longer than %v", l.Period, maxPeriod)
	case l.Interval() > maxSpan/time.Duration(l.Capacity()):
		return fmt.Sprintf("%v takes longer than %v to refill", l, maxSpan)
	}
	return ""
}

// MaxCount bounds Rate, Burst and Cost so that counts fit in 32 bits and all
// arithmetic on them, in Go and in Redis's Lua doubles, stays exact.
const MaxCount = 1<<31 - 1

// maxSpan bounds Interval*Capacity, the time an empty bucket takes to refill,
// so that timestamps plus spans never overflow int64 nanoseconds (about 146
// years; a day at 2^31-1 events of burst is well inside).
const maxSpan = time.Duration(1 << 62)

// maxPeriod bounds Period so that window arithmetic (a window's start plus
// two periods, in Unix nanoseconds) never overflows: 50 years.
const maxPeriod = 50 * 365 * 24 * time.Hour

// String returns a short form such as "100/1m0s" or "10/1s burst 20", which
// ratelimit.ParseLimit reads back.
func (l Limit) String() string {
	s := fmt.Sprintf("%d/%v", l.Rate, l.Period)
	if l.Burst != 0 && l.Burst != l.Rate {
		s += fmt.Sprintf(" burst %d", l.Burst)
	}
	return s
}
