package envoy

import (
	"time"

	"github.com/sluicehq/ratelimit"
)

// observe reports the decision on o to the service's observers.
func (s *Service) observe(o *outcome, outcome ratelimit.Outcome, lat time.Duration, err error) {
	e := ratelimit.Event{Rule: o.limit.metricName, KeyKind: "envoy", Outcome: outcome, Latency: lat, Err: err}
	if outcome == ratelimit.OutcomeAllowed || outcome == ratelimit.OutcomeDenied || outcome == ratelimit.OutcomeShadowDenied {
		e.Result = o.res
	}
	for _, ob := range s.opts.observers {
		ob.Observe(e)
	}
}

// observeDecision reports a decided outcome: allowed, denied, or (for a
// shadow or quota mode limit) shadow-denied.
func (s *Service) observeDecision(o *outcome, lat time.Duration) {
	switch {
	case o.res.Allowed:
		s.observe(o, ratelimit.OutcomeAllowed, lat, nil)
	case o.shadow:
		s.observe(o, ratelimit.OutcomeShadowDenied, lat, nil)
	default:
		s.observe(o, ratelimit.OutcomeDenied, lat, nil)
	}
}
