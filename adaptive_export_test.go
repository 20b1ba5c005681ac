package ratelimit

// AdaptiveSampleShift exposes to the tests of package ratelimit_test the
// sampling of l: one request in 2^shift is timed.
func AdaptiveSampleShift(l *AdaptiveLimiter) uint32 { return l.shift.Load() }

// AdaptiveTicketTimed reports whether t read the clock when acquired.
func AdaptiveTicketTimed(t AdaptiveTicket) bool { return t.flags&ticketTimed != 0 }
