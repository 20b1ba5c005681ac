package ratelimit

import (
	"net/http"
	"time"

	"github.com/sluicehq/ratelimit/internal/problem"
)

// Verdict is a Limiter's decision on one request, from Check or
// CheckRoute: whether it may proceed, the result of the most restrictive
// rule, and how to answer it. Write answers; Done, for an admitted
// request, gives back what it holds once it has been served.
//
// The zero Verdict admits a request without rate-limit fields (a carve-out
// or a skipped request). A Verdict is a value; Write and Done may be called
// from another goroutine than Check. What the request holds is given back
// by the first Done (or DoneStatus) on the Verdict or any copy of it; later
// calls, from any goroutine, do nothing.
type Verdict struct {
	l        *Limiter
	r        *http.Request
	kind     verdictKind
	answered bool   // handed, fields set, to a denied handler or ServeRoute's deny: Write sends the default denial
	top      *rule  // the rule reported
	res      Result // its result
	limit    Limit  // the limit its request was checked against
	cost     int    // for verdictCostExceeded
	policy   string // the RateLimit-Policy value; "" for the limiter's precomputed one
	now      time.Time
	violated []string // on a denial by several rules: all of them, most restrictive first
	err      error
	held     *held
	direct   *directDone // what a request admitted on a direct path holds, in place of held
}

type verdictKind uint8

const (
	verdictPass          verdictKind = iota // no rule decided: no fields
	verdictAllowed                          // admitted, with fields
	verdictDenied                           // a rate limit denied it: 429 or the denied handler
	verdictAdaptive                         // an adaptive limit rejected it: 503 or the denied handler
	verdictCostExceeded                     // it costs more than a rule's capacity: 429 or the denied handler
	verdictKeyError                         // the key-error policy rejected it
	verdictFailedClosed                     // a store failed and its rule fails closed
	verdictMisconfigured                    // a rule produced a request no store can enforce: 500
	verdictCanceled                         // its context ended while it waited for its paced turn: 503
)

// Allowed reports whether the request may proceed.
func (v Verdict) Allowed() bool { return v.kind <= verdictAllowed }

// Denied reports whether a limit turned the request away: a rate limit, a
// cost above a rule's capacity or an adaptive limit. It is false when the
// request may proceed and when it was stopped for another reason (its key
// could not be extracted, a store failed under fail closed, a rule is
// misconfigured): Write then answers with the core's response.
func (v Verdict) Denied() bool {
	return v.kind == verdictDenied || v.kind == verdictAdaptive || v.kind == verdictCostExceeded
}

// Status is the status Write answers with when the request may not proceed
// (429; 503 for an adaptive limit, or for a paced request whose context
// ended while it waited; the key-error status; or 500 for a misconfigured
// rule), or 0
// when it may. With a denied handler (WithDeniedHandler) or an error
// handler (WithErrorHandler), that handler picks the status Write sends.
func (v Verdict) Status() int {
	switch v.kind {
	case verdictDenied, verdictCostExceeded:
		return http.StatusTooManyRequests
	case verdictAdaptive, verdictCanceled:
		return http.StatusServiceUnavailable
	case verdictKeyError:
		return v.top.onKeyError.rejectStatus()
	case verdictFailedClosed:
		return v.top.OnStoreError.Status
	case verdictMisconfigured:
		return http.StatusInternalServerError
	}
	return 0
}

// Result is the result of the most restrictive rule that decided (the
// zero Result when none did). On an allowed request a Concurrency rule,
// whose free slots are no quota left in a window, is reported only when
// no rate rule decided.
func (v Verdict) Result() Result { return v.res }

// Rule is the name of the rule reported: the most restrictive one, or the
// one that stopped the request. "" when no rule decided.
func (v Verdict) Rule() string {
	if v.top == nil {
		return ""
	}
	return v.top.Name
}

// Violated lists the rules that denied the request, most restrictive first,
// or nil when it was not Denied.
func (v Verdict) Violated() []string {
	switch {
	case !v.Denied():
		return nil
	case v.violated != nil:
		return v.violated
	}
	return []string{v.top.Name}
}

// Err is why no store decided for some rule: an error wrapping
// ErrStoreUnavailable when a store failed (the request proceeds under
// fail open unless another rule denied it, stops under fail closed), one wrapping ErrInvalidRequest when the
// request costs more than a rule's capacity or a rule is misconfigured (it
// never wraps ErrStoreUnavailable then), or the KeyFunc's error on a key
// error; on a paced request whose context ended while it waited, an error
// wrapping the context's cause (context.Canceled, context.DeadlineExceeded),
// all its reservations given back. Nil when every rule that applied was
// decided by its store or a fallback.
func (v Verdict) Err() error { return v.err }

// SetHeaders sets the verdict's rate-limit fields on h and, when the
// request was Denied, Retry-After and Cache-Control, without writing a
// status or a body: for adapters that render a denial in their own format.
func (v Verdict) SetHeaders(h http.Header) {
	v.setHeaders(h, false)
}

func (v *Verdict) setHeaders(h http.Header, problem bool) {
	switch v.kind {
	case verdictAllowed, verdictDenied:
		policy := v.policy
		if policy == "" {
			policy = v.l.policyHeader
		}
		f := rateFields{style: v.l.headers, alg: v.top.Algorithm, policy: policy, name: v.top.quotedName, capacity: v.top.capacityText, limit: v.limit, now: v.now}
		f.write(h, &v.res, problem)
	case verdictAdaptive:
		v.top.adaptive.Load().setRejectionFields(h, v.top.quotedName, v.res.Limit.Rate, v.l.headers, problem)
	case verdictCostExceeded:
		h[hdrCacheControl] = []string{"no-store"}
	}
}

// Write answers the request: the rate-limit fields when it may proceed;
// otherwise the whole response (429 with an RFC 9457 body naming the
// violated policies, the denied handler's, 503 for an adaptive limit, the
// key-error response, a fail-closed store error, or 500 for a misconfigured
// rule). The caller must not write a response of its own when the request
// may not proceed.
func (v Verdict) Write(w http.ResponseWriter) {
	v.write(w)
}

func (v *Verdict) write(w http.ResponseWriter) {
	if v.held != nil {
		v.held.w = w
	}
	if v.kind == verdictPass {
		return
	}
	l := v.l
	if v.answered && v.Denied() { // its fields are set: see answered
		v.writeDefaultDenial(w)
		return
	}
	if v.Denied() && l.denied != nil {
		v.setHeaders(w.Header(), false)
		c := *v // the handler's copy, so that v stays on its caller's stack
		c.answered = true
		l.denied(w, v.r, &c)
		return
	}
	switch v.kind {
	case verdictAllowed:
		v.setHeaders(w.Header(), false)
	case verdictDenied:
		v.setHeaders(w.Header(), true)
		body := v.top.problem
		if v.violated != nil {
			body = problem.Denied(v.violated)
		}
		w.WriteHeader(http.StatusTooManyRequests)
		w.Write(body)
	case verdictAdaptive:
		v.setHeaders(w.Header(), true)
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write(v.top.adaptive.Load().problem)
	case verdictCostExceeded:
		problem.WriteBody(w, http.StatusTooManyRequests, problem.CostExceeded(v.top.Name, v.cost, v.limit.Capacity()))
	case verdictKeyError:
		writeKeyProblem(w, v.top.onKeyError.rejectStatus(), v.top.keyProblem, v.err)
	case verdictFailedClosed:
		if l.onError != nil {
			l.onError(w, v.r, v.err)
			return
		}
		w.Header()[hdrRetryAfter] = []string{"1"}
		status := v.Status()
		problem.Write(w, status, failClosedType, "The rate limiter is unavailable; retry shortly.")
	case verdictMisconfigured:
		problem.Write(w, http.StatusInternalServerError, "about:blank", "The rate limit is misconfigured.")
	case verdictCanceled:
		problem.Write(w, http.StatusServiceUnavailable, "about:blank", "The request ended while waiting for its turn.")
	}
}

// writeDefaultDenial sends the status and body of a denial, whose fields
// were set before the denied handler ran: what Write sends without a
// denied handler, for a handler that only observes the denial.
func (v *Verdict) writeDefaultDenial(w http.ResponseWriter) {
	switch v.kind {
	case verdictDenied:
		body := v.top.problem
		if v.violated != nil {
			body = problem.Denied(v.violated)
		}
		problem.WriteBody(w, http.StatusTooManyRequests, body)
	case verdictAdaptive:
		problem.WriteBody(w, http.StatusServiceUnavailable, v.top.adaptive.Load().problem)
	case verdictCostExceeded:
		problem.WriteBody(w, http.StatusTooManyRequests, problem.CostExceeded(v.top.Name, v.cost, v.limit.Capacity()))
	}
}

// Done gives back what an admitted request holds, once it has been served:
// its Concurrency slots; to its settled rules, the difference between the
// cost its handler reported (Settle, through Verdict.Context) and the
// estimate; and its adaptive slots with the response's status for the
// adaptive rules' classifier, read from the ResponseWriter given to
// Write when it reports one (a Status() int method, as the middleware's
// and gin's writers have). Use DoneStatus to give the status explicitly.
// Done does nothing for a request that holds nothing or was not admitted.
func (v Verdict) Done() {
	if v.held != nil {
		v.held.doneRecorded()
	} else if v.direct != nil {
		v.direct.done()
	}
}

// DoneStatus is Done with the response's status given by the caller.
func (v Verdict) DoneStatus(status int) {
	if v.held != nil {
		v.held.done(status)
	} else if v.direct != nil {
		v.direct.done() // no adaptive rule: the status is not wanted
	}
}
