package ratelimit

import "net/http"

// noDelay is the delay of a Concurrency rule's RateLimit value, which has
// no t: its slots come back when requests finish, not at a time.
const noDelay = -1

// admitSlot is the direct path of a request under a Concurrency rule, as
// admit is for a rate: the slot taken, the fields written, or the 429.
// An admitted request holds its slot in a held recycled from the
// limiter's pool, which the middleware releases when the handler returns
// or panics; handled false, having taken and written nothing, when r
// needs the general path (see admit).
func (f *fastRule) admitSlot(w http.ResponseWriter, r *http.Request, l *Limiter) (_ *held, ok, handled bool) {
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
		f.deny(h, &res, now)
		w.WriteHeader(http.StatusTooManyRequests)
		w.Write(f.problem)
		return nil, false, true
	}
	f.setFields(h, res.Remaining, noDelay, now)
	hd := l.newHeld(r)
	hd.slots = hd.slot1[:1]
	hd.slots[0] = heldSlot{ru: ru, direct: f, slot: res.Slot}
	hd.slots[0].req.Key = key
	return hd, true, true
}

// release gives back the slot that admitSlot took for key.
func (f *fastRule) release(key string, slot uint64) {
	f.check.Release(key, slot, f.now())
}
