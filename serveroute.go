package ratelimit

import (
	"errors"
	"net/http"
)

// ServeRoute is the request path of a framework adapter, in one call:
// CheckRoute, an answer that the framework may render its own way through
// deny and onError, the handler (next) for an admitted request, and Done
// once it returns. Adapters for routers whose middleware calls the next
// handler itself (gin, echo, chi) build on it rather than on Check, so
// that the order of these steps is written once.
//
// r is the request the router matched to route (see CheckRoute). Its
// verdict goes to the first of these that applies:
//
//   - deny, if not nil, answers a Denied request in the framework's format.
//     It runs with the rate-limit fields, Retry-After and Cache-Control set
//     on w's header, gets the verdict (Rule, Result, Violated) and must
//     write the response or have the framework write it; ServeRoute
//     returns its error.
//   - onError, if not nil, decides on a request for which a store failed:
//     it gets Err, which wraps ErrStoreUnavailable. A non-nil error stops
//     the request (fail closed): ServeRoute writes nothing, gives back what
//     the request holds and returns the error for the framework to render.
//     With nil the request goes on as if onError were not set, except that
//     one its store failure stopped (FailClosed) is decided again with that
//     failure let through as under FailOpen: the rules whose stores answer
//     still count it (and may deny it), and adaptive and Concurrency rules
//     hold its slots while next runs.
//
// Otherwise ServeRoute answers with Write; a request that may not proceed
// stops there, answered by the core's response. An admitted request is
// served by next, given r or, under a limiter that settles costs, r with
// the verdict's context (Verdict.Context) so that the handler's Settle
// reaches the limiter; Done runs when next returns, also when it panics
// (adaptive rules then classify the request as a 500, as with Handler).
//
// served reports whether next was called; err is what the last of deny,
// onError and next to run returned (nil when Write answered). The
// callbacks are called on the caller's goroutine and not kept, so closures
// over the framework's request context cost no allocation.
func (l *Limiter) ServeRoute(w http.ResponseWriter, r *http.Request, route string,
	deny func(*Verdict) error, onError func(error) error, next func(*http.Request) error) (served bool, err error) {
	var v Verdict
	l.check(r, routing{route: route, routed: true}, &v)
	if deny == nil || !v.Denied() {
		if onError != nil && errors.Is(v.err, ErrStoreUnavailable) {
			if err := onError(v.err); err != nil {
				if v.held != nil { // a request admitted under FailOpen may hold slots
					v.held.abandon() // unsampled: it was never served
				}
				return false, err
			}
			if v.kind == verdictFailedClosed {
				// onError lets through a request its store failure stopped:
				// decide again, that failure let through as under FailOpen,
				// so that the healthy rules count it (and may deny it) and
				// hold its slots.
				v = Verdict{}
				l.decideFailing(r, &v, true)
			}
		}
	}
	if deny != nil && v.Denied() {
		v.setHeaders(w.Header(), false)
		d := v // the callback's copy, so that v stays on the stack
		return false, deny(&d)
	}
	v.write(w)
	if !v.Allowed() {
		return false, nil
	}
	h := v.held
	if h == nil {
		return true, next(r)
	}
	returned := false
	// A panic counts as a 500 for adaptive rules, as in Limiter.Handler.
	defer func() { h.doneServed(returned) }()
	err = next(l.settleRequest(r, h))
	returned = true
	return true, err
}
