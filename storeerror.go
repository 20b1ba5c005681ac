package ratelimit

import (
	"errors"
	"fmt"
)

// fail applies rv's FailurePolicy after its store returned err, or asks
// ask (if not nil) in its place, and reports whether the request must stop. A fallback that decides leaves rv
// decided, with the request it saw (its share of the limit) so that
// releases go to the store that took the units.
func (l *Limiter) fail(d *decision, rv *ruleVerdict, err error, ask *askOnError) (stop bool) {
	ru := rv.ru
	rv.err = ruleError(ru.Name, err)
	if !errors.Is(rv.err, ErrStoreUnavailable) {
		// A LimitFunc or Cost produced something no store can enforce: a
		// bug in the configuration, never a reason to let traffic through
		// (nor, for a shadow rule, to stop it).
		rv.state = misconfigured
		l.observers.observe(Event{Rule: ru.Name, KeyKind: ru.KeyKind, Outcome: OutcomeStoreError, Err: rv.err, Latency: rv.lat, Request: d.r})
		return !ru.Shadow
	}
	p := ru.OnStoreError
	if p.mode() == failFallback {
		local := rv.req
		local.Limit = p.share(rv.req.Limit)
		local.Cost = min(local.Cost, local.Limit.Capacity())
		ctx, cancel := l.budget(d.ctx)
		res, ferr := p.Fallback.Take(ctx, local)
		cancel()
		if ferr == nil {
			l.observers.observe(Event{Rule: ru.Name, KeyKind: ru.KeyKind, Outcome: OutcomeFallback, Result: res, Err: rv.err, Latency: rv.lat, Request: d.r})
			rv.req, rv.res, rv.by, rv.state, rv.err = local, res, p.Fallback, decided, nil
			return false
		}
		rv.err = fallbackError(rv.err, ferr)
	}
	l.observers.observe(Event{Rule: ru.Name, KeyKind: ru.KeyKind, Outcome: OutcomeStoreError, Err: rv.err, Latency: rv.lat, Request: d.r})
	rv.state = failedOpen
	switch {
	case ru.Shadow: // never stops a request
	case ask != nil:
		if ask.stops(rv.err) {
			rv.state = failedClosed
		}
	case p.mode() == failClosed:
		rv.state = failedClosed
	}
	return rv.state == failedClosed
}

// askOnError is ServeRoute's onError as the request path consults it: at
// the first store failure of an enforced rule, once per request, in place
// of the rule's FailurePolicy. nil lets the request through that failure,
// and any later one, as fail open would: the rules whose stores answer still
// count it, and may deny it. An error stops the request there, as fail closed
// would: what the rules decided before is given back, and the rules after
// are not asked.
type askOnError struct {
	f     func(error) error
	asked bool
	err   error // what f returned
}

// stops reports whether the request must stop at the store failure err.
func (a *askOnError) stops(err error) bool {
	if !a.asked {
		a.asked, a.err = true, a.f(err)
	}
	return a.err != nil
}

// fallbackError is err, a store failure, with ferr, the fallback's error.
// ferr is wrapped only when it too is a failure: a fallback that rejects
// the request as invalid must not make err wrap both ErrStoreUnavailable
// and ErrInvalidRequest (the rule's failure policy applies, as for any
// failed fallback).
func fallbackError(err, ferr error) error {
	if errors.Is(ferr, ErrInvalidRequest) || errors.Is(ferr, ErrInvalidLimit) {
		return fmt.Errorf("%w (fallback: %v)", err, ferr)
	}
	return fmt.Errorf("%w (fallback: %w)", err, ferr)
}
