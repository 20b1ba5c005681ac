package ratelimitclient

import (
	"net/http"
	"time"

	"golang.org/x/time/rate"
)

// The adaptive mode's constants: a throttle after which no send was
// accepted multiplies the local rate by aimdCut (see learn.go for the
// others); until a rate is read, unthrottled responses raise it by Local's
// rate every aimdRamp seconds of sending. The rate stays between Local's
// rate divided by aimdFloor and multiplied by aimdCeil. In adaptive mode a
// request is not queued more than aimdQueue send intervals ahead: queued
// sends keep the rate they were given, and the rate may be cut before they
// go.
const (
	aimdCut   = 0.7
	aimdRamp  = 100
	aimdFloor = 100
	aimdCeil  = 100
	aimdQueue = 10
)

// newLocal returns a new partition's local limiter: Local's rate and burst,
// or Local's rate with a burst of one (pacing) in adaptive mode; nil when
// Local is not set.
func (t *Transport) newLocal() *rate.Limiter {
	if t.Local.Rate == 0 {
		return nil
	}
	burst := t.Local.Capacity()
	if t.Adaptive {
		burst = 1
	}
	return rate.NewLimiter(t.localRate(), burst)
}

// localRate is Local's rate per second.
func (t *Transport) localRate() rate.Limit {
	return rate.Limit(float64(t.Local.Rate) / t.Local.Period.Seconds())
}

// usesLocal reports whether the local limiter applies: it does only while
// the server has sent no rate-limit fields in the partition.
func (p *partition) usesLocal() bool {
	if p.local == nil {
		return false
	}
	for i := range p.policies {
		if p.policies[i].active {
			return false
		}
	}
	return true
}

// adapt runs the adaptive mode's step for a response with the fields h to a
// send made at sent, received at now; block is a throttle's Retry-After.
// Throttles set the rate to the one the server was read to accept (see
// learn.go); accepted responses raise it, additively until it was read, and
// slowly after. The caller holds p.mu.
func (t *Transport) adapt(p *partition, h http.Header, throttled bool, block time.Duration, sent, now mono) {
	if !t.Adaptive || !p.usesLocal() {
		return
	}
	base := float64(t.localRate())
	date := p.clock.read(h, now).date
	sentAt := p.clock.wall(sent) // the learner reads the server's Dates against wall times
	switch {
	case throttled:
		if !p.throttled(h, sentAt, block, p.clock.wall(now)) {
			return
		}
	case p.ad.learn.learned:
		p.ad.learn.accepted(sentAt, date)
		p.ad.sched.landed(sentAt, date)
		g := learnGrowth
		if p.rate < p.ad.learn.ceil {
			g = learnCatch
		}
		p.rate *= 1 + g
	default:
		p.ad.learn.accepted(sentAt, date)
		p.rate += base / aimdRamp / p.rate
	}
	p.rate = min(max(p.rate, base/aimdFloor), base*aimdCeil)
	p.local.SetLimitAt(p.localTime(now), rate.Limit(p.rate))
}

// localTime is t for the local limiter, as a wall time (a rate.Limiter
// reads time.Time), or the latest time given to it when t is earlier. A
// rate.Limiter given a time earlier than the one before moves its clock
// back, and credits the time between them again when it is next given a
// later one: requests reserving jittered slots out of order were admitted
// many times past the limit (golang/go#71360 reports the same under
// contention, where callers read the clock before taking the lock).
// The caller holds p.mu.
func (p *partition) localTime(t mono) time.Time {
	p.localAt = max(p.localAt, t)
	return p.clock.wall(p.localAt)
}
