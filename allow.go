package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"github.com/sluicehq/ratelimit/stores"
	"time"
)

// Allow reports whether one event for key fits now under every rule of the
// limiter, and consumes it if so; see AllowN.
func (l *Limiter) Allow(ctx context.Context, key string) (Result, error) {
	return l.AllowN(ctx, key, 1)
}

// AllowN reports whether n events for key fit now under every enforced
// rule, and consumes them if so. Under a paced rule (Pace) it waits for
// the events' turn, within MaxDelay and ctx; when ctx ends first, the
// reservation is given back and the error wraps ctx's cause. It takes the middleware's decision path:
// key is used for each rule (in its own rule's namespace), one store call
// per store within the time budget (WithTimeout), units taken by one rule
// are given back when another denies, each rule's FailurePolicy applies
// and observers see every decision (with a nil Event.Request). Rules with
// a LimitFunc, Quota or QuotaFunc need a request and are skipped, as are
// shadow and adaptive rules.
//
// The Result is the most restrictive rule's. The error contract, with one
// rule as with several:
//
//   - nil: every rule was decided by its store or a fallback.
//   - wrapping ErrStoreUnavailable (and the store's error, such as
//     context.DeadlineExceeded when the budget ran out, or breaker.ErrOpen):
//     a store failed and no fallback decided. The Result then carries the
//     failure policy's answer: Allowed under fail open (unless another rule
//     denied), not Allowed under fail closed.
//   - wrapping ErrInvalidRequest, never ErrStoreUnavailable: n is negative
//     or above a rule's capacity (such a request could never be admitted),
//     no enforced rule can decide without a request, or a store rejected
//     the request. Nothing is consumed and the Result is not Allowed.
func (l *Limiter) AllowN(ctx context.Context, key string, n int) (Result, error) {
	if f := l.direct(); f != nil && n == 1 && f.pace == nil && !f.shadow {
		return l.allowDirect(f, key), nil
	}
	if s := l.stack; s != nil && n == 1 && s.events != nil {
		return s.allow(key), nil
	}
	res, _, err := l.allowN(ctx, key, n, true)
	return res, err
}

// allowN is AllowN, paced or not, also returning the fewest units any
// decided rule has left (n when none decided).
func (l *Limiter) allowN(ctx context.Context, key string, n int, paced bool) (Result, int, error) {
	if l.zero() {
		return Result{}, 0, errZeroLimiter
	}
	b := l.getBatch()
	defer l.putBatch(b)
	rvs, err := l.keyRequests(b.rvs[:0], key, n)
	if err != nil {
		return Result{}, 0, err
	}
	d := decision{ctx: ctx, enforced: len(rvs), scratch: &b.scratch}
	var v Verdict
	if l.paced && paced {
		l.settlePaced(&d, rvs, nil, &v, nil)
	} else {
		l.settle(&d, rvs, nil, &v, nil)
	}
	fewest := n
	for i := range rvs {
		if rvs[i].answered() {
			fewest = min(fewest, rvs[i].res.Remaining)
		}
	}
	switch v.kind {
	case verdictMisconfigured:
		return Result{}, 0, v.err
	case verdictCanceled:
		return Result{Limit: v.limit}, 0, v.err
	case verdictFailedClosed:
		return Result{Limit: v.limit, RetryAfter: time.Second}, 0, v.err
	case verdictPass:
		return Result{Allowed: true}, n, v.err // every rule failed open
	}
	return v.res, fewest, v.err
}

// errZeroLimiter is what the zero Limiter answers: it has no rules.
var errZeroLimiter = fmt.Errorf("%w: the zero Limiter has no rules; build one with NewLimiter or NewRulesLimiter", ErrInvalidRequest)

// zero reports whether l is the zero Limiter: every Limiter built has at
// least one rule.
func (l *Limiter) zero() bool { return l.rules == nil && l.adaptive == nil }

// keyRequests adds to rvs the request of n events for key under every
// enforced static rule.
func (l *Limiter) keyRequests(rvs []ruleVerdict, key string, n int) ([]ruleVerdict, error) {
	if n < 0 {
		return nil, fmt.Errorf("%w: AllowN of %d events", ErrInvalidRequest, n)
	}
	for _, ru := range l.rules[:l.enforced] {
		if !ru.static {
			continue
		}
		req := stores.Request{Rule: ru.Name, Key: compactKey(key), Limit: ru.Limit, Algorithm: ru.Algorithm, Cost: n}
		if n > ru.Limit.Capacity() {
			return nil, l.costExceeded(nil, ru, &req)
		}
		rvs = add(rvs, ru, req)
	}
	if len(rvs) == 0 {
		return nil, fmt.Errorf("%w: every enforced rule of this limiter needs a request (LimitFunc, Quota or QuotaFunc); use the middleware", ErrInvalidRequest)
	}
	return rvs, nil
}

// Return gives back n events for key under every enforced static rule, for
// example after a login attempt that turned out to be valid. Each call is
// bounded by the time budget; the error joins the stores' errors, each
// wrapping ErrStoreUnavailable (or ErrInvalidRequest when n is invalid).
func (l *Limiter) Return(ctx context.Context, key string, n int) error {
	if n < 0 {
		return fmt.Errorf("%w: Return of %d events", ErrInvalidRequest, n)
	}
	if l.zero() {
		return errZeroLimiter
	}
	var errs []error
	found := false
	for _, ru := range l.rules[:l.enforced] {
		if !ru.static {
			continue
		}
		found = true
		req := stores.Request{Rule: ru.Name, Key: compactKey(key), Limit: ru.Limit, Algorithm: ru.Algorithm, Cost: n}
		bctx, cancel := l.budget(ctx)
		if err := ru.Store.Return(bctx, req); err != nil {
			errs = append(errs, ruleError(ru.Name, err))
		}
		cancel()
	}
	if !found {
		return fmt.Errorf("%w: every enforced rule of this limiter needs a request", ErrInvalidRequest)
	}
	return errors.Join(errs...)
}

// AllowAtMost takes as many of n events for key as fit now under every
// enforced rule, up to n, and returns how many it took: a batch caller
// sends that many now and keeps the rest for later. It takes the path of
// AllowN, with the same error contract, but never waits for a paced turn:
// what it grants fits now. When none fit, granted is 0 and res, not
// Allowed, has RetryAfter the wait until one will (zero if one already
// fits again). Under contention it may grant fewer than would have fit (it
// asks again at most three times), never more.
func (l *Limiter) AllowAtMost(ctx context.Context, key string, n int) (granted int, res Result, err error) {
	if n < 0 {
		return 0, Result{}, fmt.Errorf("%w: AllowAtMost of %d events", ErrInvalidRequest, n)
	}
	for _, ru := range l.rules[:l.enforced] {
		if ru.static {
			n = min(n, ru.Limit.Capacity())
		}
	}
	for try := 0; ; try++ {
		var left int
		res, left, err = l.allowN(ctx, key, n, false)
		if res.Allowed || err != nil && !errors.Is(err, ErrStoreUnavailable) {
			break
		}
		fewer := min(n-1, left) // what the tightest rule has left
		if fewer <= 0 || try == 3 {
			if err == nil && n > 1 { // say when one event fits, not n
				res, _, err = l.allowN(ctx, key, 0, false)
				res.Allowed = false
			}
			return 0, res, err
		}
		n = fewer
	}
	if !res.Allowed {
		return 0, res, err
	}
	return n, res, err
}
