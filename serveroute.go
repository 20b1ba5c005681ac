package ratelimit

import "net/http"

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
//     write the response or have the framework write it (the verdict's
//     Write sends the core's 429 or 503, fields unchanged); ServeRoute
//     returns its error.
//   - onError, if not nil, decides what a store failure does to the
//     request, in place of the failing rule's FailurePolicy. It is called
//     when the failure happens, at most once per request, with the error
//     (it wraps ErrStoreUnavailable; a fallback store that decided is no
//     failure). A non-nil error stops the request there, as fail closed
//     would: what the rules decided before is given back, the rules after
//     are not asked, ServeRoute writes nothing and returns the error for
//     the framework to render. With nil the request goes on through that
//     failure (and any later one) as under fail open: the rules whose
//     stores answer count it and may deny it (then deny, or the core's
//     429, answers), and adaptive and Concurrency rules hold its slots
//     while next runs. Each request is decided once.
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
	rt := routing{route: route, routed: true}
	if deny == nil && (onError == nil || l.direct() != nil || l.stack != nil) {
		// The middleware's own path (a store of the direct path never
		// fails, so onError would never be asked).
		if f := l.direct(); f != nil && f.holds {
			return l.serveHoldingRoute(w, r, rt, next)
		}
		h, ok := l.admitHeld(w, r, rt, nil)
		if !ok {
			return false, nil
		}
		return true, l.serveHeld(r, h, next)
	}
	var v Verdict
	ask := askOnError{f: onError}
	pa := &ask
	if onError == nil {
		pa = nil // the rules' FailurePolicy decides
	}
	l.check(r, rt, pa, &v)
	if ask.err != nil {
		return false, ask.err // stopped at its failure: nothing is held
	}
	if deny != nil && v.Denied() {
		v.setHeaders(w.Header(), false)
		d := v // the callback's copy, so that v stays on the stack
		d.answered = true
		return false, deny(&d)
	}
	v.write(w)
	if !v.Allowed() {
		return false, nil
	}
	if v.direct != nil {
		return true, l.serveDirect(r, v.direct, next)
	}
	return true, l.serveHeld(r, v.held, next)
}

// serveDirect is serveHeld for a request admitted on a direct path by
// check, holding dd.
func (l *Limiter) serveDirect(r *http.Request, dd *directDone, next func(*http.Request) error) error {
	defer dd.done()
	return next(l.settleRequest(r, &dd.carriage))
}

// serveHeld runs next for an admitted request holding h (nil when it holds
// nothing), and gives back what it holds when next returns or panics.
func (l *Limiter) serveHeld(r *http.Request, h *held, next func(*http.Request) error) (err error) {
	if h == nil {
		return next(r)
	}
	returned := false
	// A panic counts as a 500 for adaptive rules, as in Limiter.Handler.
	defer func() { h.doneServed(returned); l.recycle(h) }()
	err = next(l.settleRequest(r, &h.carriage))
	returned = true
	return err
}
