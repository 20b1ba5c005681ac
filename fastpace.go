package ratelimit

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/sluicehq/ratelimit/internal/memstore"
	"github.com/sluicehq/ratelimit/stores"
	"github.com/sluicehq/ratelimit/stores/memory"
)

// fastPace is the pacing step of a direct path: the rule's waiting places,
// and what gives a reservation back when its request leaves before its
// turn.
type fastPace struct {
	l     *Limiter
	pc    *pacer
	store *memory.Store
}

// admitPaced is admitSteps for a paced rule. A request is first decided
// as if it could not wait: one that fits now is served at once, and one
// that would need longer than the pace's MaxDelay rejected at once,
// without taking a waiting place (which every check would otherwise
// write). Only one that could wait takes a place, if one is free, and is
// decided again with the place's horizon (the pace's MaxDelay, cut to its
// deadline); when admitted for later it waits for its turn. As on the
// general path: a request whose context ends while it waits gives its
// reservation back and gets a 503; the fields of one served after waiting
// describe the moment it is served.
func (f *fastRule) admitPaced(w http.ResponseWriter, r *http.Request, ru *rule) (ok, handled bool) {
	h := w.Header()
	key, err := ru.Key(r)
	if err != nil || nested(h) {
		return false, false
	}
	key = compactKey(key)
	p := f.pace
	start := f.obs.start()
	now := f.now()
	var res memstore.Result
	f.check.TakeInto(key, now, &res) // the prepared check has no horizon: TakeDelayed's 0
	var horizon time.Duration
	if !res.Allowed && time.Duration(res.RetryAfter) <= p.pc.maxDelay && p.pc.enter(key) {
		defer p.pc.leave(key)
		if horizon = p.pc.horizon(r.Context()); time.Duration(res.RetryAfter) <= horizon {
			f.check.TakeDelayed(key, now, int64(horizon), &res)
		}
	}
	f.observe(r, ru, &res, start)
	if delay := min(time.Duration(res.Delay), horizon); res.Allowed && delay > 0 {
		if !p.wait(r.Context(), delay) {
			p.giveBack(r, ru, key, horizon, res.Slot)
			v := Verdict{l: p.l, r: r, kind: verdictCanceled, top: ru, res: res.Under(ru.Limit), limit: ru.Limit,
				err: fmt.Errorf("ratelimit: the request ended while waiting for its turn: %w", context.Cause(r.Context()))}
			v.write(w)
			return false, true
		}
		res.ResetAfter = max(0, res.ResetAfter-int64(delay))
	}
	return f.respond(w, h, &res, now), true
}

// wait waits for delay, or for ctx to end first (false).
func (p *fastPace) wait(ctx context.Context, delay time.Duration) bool {
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// giveBack returns the reservation slot of key, taken with horizon, to
// the store.
func (p *fastPace) giveBack(r *http.Request, ru *rule, key string, horizon time.Duration, slot uint64) {
	req := stores.Request{Rule: ru.Name, Key: key, Limit: ru.Limit, Algorithm: ru.Algorithm, Cost: 1, MaxDelay: horizon}
	p.l.release(context.WithoutCancel(r.Context()), r, ru, p.store, req, slot)
}

// nested reports whether h already carries rate-limit fields: a limiter
// nested in another adds its members to them, on the general path.
func nested(h http.Header) bool {
	if len(h) == 0 {
		return false
	}
	_, policy := h[hdrPolicy]
	_, rateLimit := h[hdrRateLimit]
	return policy || rateLimit
}
