package adaptive

// SampleShift exposes to the tests of package ratelimit_test the
// sampling of l: one request in 2^shift is timed.
func SampleShift(l *Limiter) uint32 { return l.shift.Load() }
