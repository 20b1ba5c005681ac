package ratelimitclient

// Servers send the same RateLimit-Policy on every response, and the same
// RateLimit while the quota they report does not move. A response whose two
// fields are, byte for byte, those of the response the partition applied
// last says nothing new: applying it again would only give back the quota
// the client has used since, and leave the reset where it is. Such a
// response is not parsed, and not applied, while that lets no more sends go
// before the reset than applying it would (the sends since stay counted):
// each policy's state still comes from a response (it was not extrapolated
// past a reset), its reset has not come, and at least half of the quota the
// response reported is left to the client. Otherwise it is applied as any
// other.

// seenFields are the RateLimit and RateLimit-Policy values of the response a
// partition applied last, when it was read from them.
type seenFields struct {
	rateLimit, policy string
	ok                bool
}

// note records, after the response whose RateLimit and RateLimit-Policy
// lines are rl and pol has been applied in p, whether its fields may stand
// for those of the responses that repeat them. The caller holds p.mu.
func (p *partition) note(rl, pol []string, obs *observation, applied, throttle bool) {
	p.seen = seenFields{}
	if !applied || throttle || !obs.ietf || len(rl) != 1 || len(pol) > 1 {
		return
	}
	p.seen = seenFields{rateLimit: rl[0], ok: true}
	if len(pol) == 1 {
		p.seen.policy = pol[0]
	}
}

// repeats reports whether a response received at now with the RateLimit and
// RateLimit-Policy lines rl and pol repeats the one p applied last, and
// applying it would change nothing but give back quota (see above). Only
// responses that are not throttles are passed to it.
func (p *partition) repeats(rl, pol []string, now mono) bool {
	if len(rl) != 1 || len(pol) > 1 {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.seen.ok || rl[0] != p.seen.rateLimit || len(pol) == 1 && pol[0] != p.seen.policy ||
		len(pol) == 0 && p.seen.policy != "" {
		return false
	}
	return p.settled(now)
}

// settled reports whether every active policy of p is still as the
// response last applied left it, before its reset and with at least half
// the quota it reported. The caller holds p.mu.
func (p *partition) settled(now mono) bool {
	for i := range p.policies {
		q := &p.policies[i]
		if q.active && (!q.bounded || now >= q.resetAt || 2*q.rem <= q.r) {
			return false
		}
	}
	return true
}
