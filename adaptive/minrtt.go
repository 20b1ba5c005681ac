package adaptive

import (
	"slices"
	"time"
)

// learn folds a window's latency into the minimum RTT, kept as the lowest
// window latency of the current and the previous half-horizon, and
// returns it.
func (l *Limiter) learn(t, lat int64) int64 {
	if d := t - l.baseAt; d >= l.horizon/2 || d < 0 { // d < 0: the clock stepped back
		l.base[1], l.base[0], l.baseAt = l.base[0], 0, t
	}
	if pb := l.probeBase.Swap(0); pb != 0 && (l.base[0] == 0 || pb < l.base[0]) {
		l.base[0] = pb
	}
	if l.base[0] == 0 || lat < l.base[0] {
		l.base[0] = lat
	}
	base := l.base[0]
	if l.base[1] != 0 {
		base = min(base, l.base[1])
	}
	l.minRTT.Store(base)
	return base
}

// probeCount is how many of the first requests give the first minimum RTT.
const probeCount = 8

// recordProbe records a probe's latency; the last one computes their
// median, the first minimum RTT.
func (l *Limiter) recordProbe(rtt time.Duration, v Sample) {
	if v != SampleSuccess || rtt < 0 {
		rtt = -1
	}
	i := l.probeSlot.Add(1) - 1
	if i >= probeCount {
		return // a ticket released twice
	}
	l.probeRTT[i].Store(int64(rtt))
	if l.probeDone.Add(1) != probeCount {
		return
	}
	var rtts []int64
	for i := range l.probeRTT {
		if v := l.probeRTT[i].Load(); v >= 0 {
			rtts = append(rtts, v)
		}
	}
	if len(rtts) > 0 {
		slices.Sort(rtts)
		l.probeBase.Store(max(1, rtts[len(rtts)/2]))
	}
}
