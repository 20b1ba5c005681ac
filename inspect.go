package ratelimit

import (
	"context"
	"fmt"
	"github.com/sluicehq/ratelimit/stores"
)

// Peek reads the state of key under the rule named rule without consuming
// anything: Result.Allowed reports whether one unit would fit, Remaining how
// many. key is the value the rule's KeyFunc returns (a client IP, a tenant).
// A rule with a LimitFunc or QuotaFunc is read against its Limit, which
// must then be set; a Quota rule against the window containing the
// limiter's current time. The error wraps ErrUnknownRule,
// ErrInvalidRequest or the store's error.
func (l *Limiter) Peek(ctx context.Context, rule, key string) (Result, error) {
	ru := l.ruleNamed(rule)
	if ru == nil {
		return Result{}, fmt.Errorf("%w %q", ErrUnknownRule, rule)
	}
	req := stores.Request{Rule: ru.Name, Key: compactKey(key), Limit: ru.Limit, Algorithm: ru.Algorithm}
	if !ru.Quota.IsZero() {
		req.Limit, req.Window = quotaWindow(ru.Quota, l.clock.Now())
	} else if req.Limit == (Limit{}) {
		return Result{}, fmt.Errorf("%w: rule %q picks its limit per request and has no Limit to peek against", ErrInvalidRequest, rule)
	}
	return ru.Store.Take(ctx, req)
}

// PeekUnder is Peek against limit instead of the rule's Limit: for a rule
// whose LimitFunc gives some keys a limit of their own (a tenant's plan, a
// rules file's per-key override), read a key under the limit its requests
// are checked against. It is refused, with an error wrapping
// ErrInvalidRequest, for a Quota or QuotaFunc rule (their windows come
// from the calendar) and for an invalid limit.
func (l *Limiter) PeekUnder(ctx context.Context, rule, key string, limit Limit) (Result, error) {
	ru := l.ruleNamed(rule)
	if ru == nil {
		return Result{}, fmt.Errorf("%w %q", ErrUnknownRule, rule)
	}
	if !ru.Quota.IsZero() || ru.QuotaFunc != nil {
		return Result{}, fmt.Errorf("%w: rule %q is a quota: use Peek", ErrInvalidRequest, rule)
	}
	req := stores.Request{Rule: ru.Name, Key: compactKey(key), Limit: limit, Algorithm: ru.Algorithm}
	if err := req.Validate(); err != nil { // the limit, and its Burst under the rule's algorithm
		return Result{}, fmt.Errorf("%w: rule %q: %w", ErrInvalidRequest, rule, err)
	}
	return ru.Store.Take(ctx, req)
}

// Reset forgets the state of key under the rule named rule, in the rule's
// store, so that the key starts again with full capacity: to lift a block
// early or undo a mistaken limit. key is the value the rule's KeyFunc
// returns. The error wraps ErrUnknownRule, ErrResetUnsupported or the
// store's error.
func (l *Limiter) Reset(ctx context.Context, rule, key string) error {
	ru := l.ruleNamed(rule)
	if ru == nil {
		return fmt.Errorf("%w %q", ErrUnknownRule, rule)
	}
	rs, ok := ru.Store.(stores.Resetter)
	if !ok {
		return fmt.Errorf("%w: %T", ErrResetUnsupported, ru.Store)
	}
	return rs.Reset(ctx, ru.Name, compactKey(key), ru.Algorithm)
}

func (l *Limiter) ruleNamed(name string) *rule {
	for _, ru := range l.rules {
		if ru.Name == name {
			return ru
		}
	}
	return nil
}
