package ratelimit

import (
	"net/http"
	"strconv"
	"time"

	"github.com/sluicehq/ratelimit/internal/fieldval"
	"github.com/sluicehq/ratelimit/internal/memstore"
	"github.com/sluicehq/ratelimit/stores"
)

// noDelay is the delay of a Concurrency rule's RateLimit value, which has
// no t: its slots come back when requests finish, not at a time.
const noDelay = -1

// admitHolding is the direct path of a request that holds something once
// admitted, as admit is for a plain rate: a Concurrency rule's slot, or a
// settled rule's admission. It takes the decision, writes the fields or
// the 429, and returns what an admitted request holds, which the
// middleware gives back when the handler returns or panics; handled false,
// having taken and written nothing, when r needs the general path (see
// admit).
func (f *fastRule) admitHolding(w http.ResponseWriter, r *http.Request, l *Limiter) (_ *held, ok, handled bool) {
	ru := l.rules[0]
	key, err := ru.Key(r)
	if err != nil {
		return nil, false, false
	}
	h := w.Header()
	if nested(h) {
		return nil, false, false
	}
	now := f.now()
	key = compactKey(key)
	res := f.check.Take(key, now)
	if !res.Allowed {
		if f.slots && res.Remaining > 0 {
			// not with a cost of 1; deny, on the benchmarked path, would give t
			f.setFields(h, res.Remaining, noDelay, now)
			h[hdrRetryAfter] = []string{strconv.FormatInt(max(1, fieldval.Seconds(time.Duration(res.RetryAfter))), 10)}
			h[hdrCacheControl] = []string{"no-store"}
			h[hdrContentType] = []string{"application/problem+json"}
		} else {
			f.deny(h, &res, now)
		}
		w.WriteHeader(http.StatusTooManyRequests)
		w.Write(f.problem)
		return nil, false, true
	}
	hd := l.newHeld(r)
	if f.slots {
		f.setFields(h, res.Remaining, noDelay, now)
		hd.slots = hd.slot1[:1]
		hd.slots[0] = heldSlot{ru: ru, direct: f, slot: res.Slot}
		hd.slots[0].req.Key = key
		return hd, true, true
	}
	f.allowedIn(h, &res, hd.room)
	hd.settlements = hd.settle1[:1]
	hd.settlements[0] = settlement{ru: ru, store: ru.Store, slot: res.Slot,
		req: stores.Request{Rule: ru.Name, Key: key, Limit: ru.Limit, Algorithm: ru.Algorithm, Cost: 1}}
	return hd, true, true
}

// allowedIn is allowed with the response's field values kept in room, the
// allocation of the held that the request has anyway.
func (f *fastRule) allowedIn(h http.Header, res *memstore.Result, room *heldRoom) {
	next := res.Next // a window's: see nextAfter
	if f.gcra {
		next = fieldval.GCRANext(res.ResetAfter, f.unit, f.units, res.Remaining)
	}
	remaining, t := max(0, res.Remaining), fieldval.Seconds(time.Duration(next))
	vals := &room.vals
	if v := f.values.get(remaining, t); v != nil {
		vals[1] = v.s
	} else {
		vals[1] = f.format(room.buf[:0], remaining, t)
	}
	vals[0] = f.policy
	h[hdrPolicy] = vals[0:1:1]
	h[hdrRateLimit] = vals[1:2:2]
}

// release gives back the slot that admitHolding took for key.
func (f *fastRule) release(key string, slot uint64) {
	f.check.Release(key, slot, f.now())
}
