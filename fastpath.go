package ratelimit

import (
	"math/bits"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/sluicehq/ratelimit/internal/fieldval"
	"github.com/sluicehq/ratelimit/internal/memstore"
	"github.com/sluicehq/ratelimit/stores"
	"github.com/sluicehq/ratelimit/stores/memory"
)

// fastRule is the direct path of a single static rule on an in-process
// store (the default, or any *memory.Store given with WithStore): the check validated and prepared for the engine once, when the
// Limiter is built, and response fields built from pre-formatted parts.
//
// The policy value and, on a denial, every field value are shared between
// responses; see denyFields for how a shared value is kept from being
// edited in place.
type fastRule struct {
	ms      *memstore.Handle // the store's engine and clock
	check   *memstore.Prepared
	policy  string
	quoted  string
	quotedR string // quoted + ";r="
	problem []byte
	system  bool                           // the store reads SystemClock
	gcra    bool                           // t comes from fieldval.GCRANext, else from the engine's Next
	slots   bool                           // a Concurrency rule: see takeHolding
	holds   bool                           // slots, or a settled rule: see takeHolding
	shadow  bool                           // the rule reports without enforcing: no fields
	steps   bool                           // shadow, or observers: see admitSteps
	obs     *observers                     // the limiter's, for the steps
	pace    *fastPace                      // a paced rule's step, or nil
	unit    int64                          // GCRA: the limit's Interval
	units   int64                          // GCRA: the limit's Capacity
	denials [16]atomic.Pointer[denyFields] // by t mod 16
	values  valueCache                     // RateLimit values of allowed responses
}

// prepareFast compiles the direct path of a limiter of one static rule (no
// LimitFunc, Quota or Cost) on an in-process store, with the default IETF
// fields and no denied handler: the rule's check validated and prepared
// for the engine, its fields pre-formatted. Observers, a shadow rule and
// pacing are steps of that path (admitSteps); a Concurrency rule's slots
// and a settled rule's admissions are held by takeHolding (directHeld).
func (l *Limiter) prepareFast() {
	if len(l.rules) != 1 || l.headers != HeadersIETF || l.needNow || l.denied != nil {
		return
	}
	ru := l.rules[0]
	st, ok := ru.Store.(*memory.Store)
	if !ok || !ru.static || ru.Cost != nil || l.policyHeader == "" && !ru.Shadow {
		return
	}
	slots := ru.Algorithm == Concurrency
	if (slots || ru.Settled) && (ru.Shadow || len(l.observers) > 0 || ru.pacer != nil) {
		return // what it holds is held by the general path's steps
	}
	req := stores.Request{Rule: ru.Name, Limit: ru.Limit, Algorithm: ru.Algorithm, Cost: 1}
	if req.Validate() != nil {
		return
	}
	ms := new(memstore.Handle)
	st.Engine(ms)
	ru.fast = &fastRule{
		ms:      ms,
		check:   ms.Engine.Prepare(memstore.Valid(&req)),
		policy:  l.policyHeader,
		quoted:  ru.quotedName,
		quotedR: ru.quotedName + ";r=",
		problem: ru.problem,
		system:  ms.Clock == stores.SystemClock(),
		gcra:    ru.Algorithm == GCRA,
		slots:   slots,
		holds:   slots || ru.Settled,
		shadow:  ru.Shadow,
		steps:   ru.Shadow || len(l.observers) > 0 || ru.pacer != nil,
		obs:     &l.observers,
		unit:    int64(ru.Limit.Interval()),
		units:   int64(ru.Limit.Capacity()),
	}
	if ru.pacer != nil {
		ru.fast.pace = &fastPace{l: l, pc: ru.pacer, store: st}
	}
}

// admit is the direct path of a request: the decision and the response
// fields, and on a denial the 429. It reports handled false, having
// written nothing, when the request needs the general path: the key
// function failed, or the response already carries rate-limit fields (a
// limiter nested in another adds its members to them).
func (f *fastRule) admit(w http.ResponseWriter, r *http.Request, ru *rule) (ok, handled bool) {
	if f.steps {
		return f.admitSteps(w, r, ru)
	}
	// take and respond, written out: the path without steps is the
	// benchmarked one, and each call costs it.
	key, err := ru.Key(r)
	if err != nil {
		return false, false
	}
	h := w.Header()
	if nested(h) {
		return false, false
	}
	now := f.now()
	var res memstore.Result
	f.check.TakeInto(compactKey(key), now, &res)
	if res.Allowed {
		next := res.Next // a window's: see nextAfter
		if f.gcra {
			next = fieldval.GCRANext(res.ResetAfter, f.unit, f.units, res.Remaining)
		}
		f.setFields(h, res.Remaining, fieldval.Seconds(time.Duration(next)), now)
		return true, true
	}
	f.deny(h, &res, now)
	w.WriteHeader(http.StatusTooManyRequests)
	w.Write(f.problem)
	return false, true
}

// respond writes the fields of the decision res, taken at now, and on a
// denial the 429, and reports whether the request may proceed.
func (f *fastRule) respond(w http.ResponseWriter, h http.Header, res *memstore.Result, now int64) bool {
	if res.Allowed {
		f.allowed(h, res, now)
		return true
	}
	f.deny(h, res, now)
	w.WriteHeader(http.StatusTooManyRequests)
	w.Write(f.problem)
	return false
}

// take is the decision of the direct path on r, at now: handled false when
// the request needs the general path (see admit).
func (f *fastRule) take(h http.Header, r *http.Request, ru *rule) (_ memstore.Result, now int64, handled bool) {
	key, err := ru.Key(r)
	if err != nil || nested(h) {
		return memstore.Result{}, 0, false
	}
	now = f.now()
	return f.check.Take(compactKey(key), now), now, true
}

// allowed sets the fields of an allowed request.
func (f *fastRule) allowed(h http.Header, res *memstore.Result, now int64) {
	next := res.Next // a window's: see nextAfter
	if f.gcra {
		next = fieldval.GCRANext(res.ResetAfter, f.unit, f.units, res.Remaining)
	}
	f.setFields(h, res.Remaining, fieldval.Seconds(time.Duration(next)), now)
}

// deny sets the fields of a denied request, without status or body.
func (f *fastRule) deny(h http.Header, res *memstore.Result, now int64) {
	t := fieldval.Seconds(time.Duration(res.RetryAfter))
	if res.Remaining == 0 {
		f.denial(t).set(h)
		return
	}
	// not with a cost of 1, but the fields would say so
	f.setFields(h, res.Remaining, t, now)
	h[hdrRetryAfter] = []string{strconv.FormatInt(max(1, t), 10)}
	h[hdrCacheControl] = []string{"no-store"}
	h[hdrContentType] = []string{"application/problem+json"}
}

// setFields writes the policy and RateLimit fields, with remaining and t
// formatted as appendRateLimit does; now is the time of the check. The one
// allocation is the two slices the header map points to, which belong to
// this response alone, so that a handler that assigns into them edits its
// own response only. The strings they hold are shared (strings are
// immutable): the policy, and the RateLimit value that an earlier response
// with the same remaining and t built, when the cache still holds it.
func (f *fastRule) setFields(h http.Header, remaining, t, now int64) {
	remaining = max(0, remaining)
	var vals *[2]string
	// A new object's fields are written without write barriers.
	if v := f.values.get(remaining, t); v != nil {
		vals = &[2]string{f.policy, v.s}
	} else if s, ok := f.runValue(remaining, t); ok {
		vals = &[2]string{f.policy, s}
	} else {
		vals = f.buildValue(remaining, t, admitValue(now))
		vals[0] = f.policy
	}
	h[hdrPolicy] = vals[0:1:1]
	h[hdrRateLimit] = vals[1:2:2]
}

// buildValue formats the RateLimit value of remaining and t and returns
// the response's slices holding it, caching the value when cache is set,
// all in one allocation, whose buffer is the smallest that the value fits.
func (f *fastRule) buildValue(remaining, t int64, cache bool) *[2]string {
	switch n := len(f.quoted) + 6 + digits(remaining) + digits(t); {
	case n <= 32:
		return newAllowed[[32]byte](f, remaining, t, cache)
	case n <= 48:
		return newAllowed[[48]byte](f, remaining, t, cache)
	}
	return newAllowed[[64]byte](f, remaining, t, cache) // or longer: format spills
}

// newAllowed is buildValue with a buffer of type B.
func newAllowed[B valueBuf](f *fastRule, remaining, t int64, cache bool) *[2]string {
	if cache {
		c := new(cachedAllowed[B])
		return f.cacheValue(&c.v, &c.vals, emptyBuf(&c.buf), remaining, t)
	}
	a := new(allowed[B])
	a.vals[1] = f.format(emptyBuf(&a.buf), remaining, t)
	return &a.vals
}

// cacheValue formats the value into buf, records it in v, caches v and
// returns vals holding it.
func (f *fastRule) cacheValue(v *rateLimitValue, vals *[2]string, buf []byte, remaining, t int64) *[2]string {
	*v = rateLimitValue{remaining: remaining, t: t, s: f.format(buf, remaining, t)}
	vals[1] = v.s
	f.values.put(v)
	return vals
}

// format appends the RateLimit value to buf, an empty slice of an
// allocation of its own, and returns it as a string sharing buf's memory
// when it fit: those bytes are never written again.
func (f *fastRule) format(buf []byte, remaining, t int64) string {
	b := f.appendValue(buf, remaining, t)
	if cap(buf) > 0 && &b[0] == &buf[:1][0] {
		return unsafe.String(&b[0], len(b))
	}
	return string(b) // a long name spilled out of buf
}

// appendValue appends the RateLimit value of remaining and t to b.
func (f *fastRule) appendValue(b []byte, remaining, t int64) []byte {
	b = append(b, f.quotedR...)
	b = strconv.AppendInt(b, remaining, 10)
	if 0 <= t && t < 10 { // the usual delay, without strconv's copy
		b = append(b, ';', 't', '=', byte('0'+t))
	} else if 0 <= t && t < 10_000 { // a window's end, hours away at most
		b = appendDelay(append(b, ";t="...), t)
	} else if t != noDelay {
		b = append(b, ";t="...)
		b = strconv.AppendInt(b, t, 10)
	}
	return b
}

// appendDelay appends 10 <= t < 10,000 in decimal, as strconv would
// without its copy through a buffer of its own.
func appendDelay(b []byte, t int64) []byte {
	if t >= 1000 {
		b = append(b, byte('0'+t/1000))
	}
	if t >= 100 {
		b = append(b, byte('0'+t/100%10))
	}
	return append(b, byte('0'+t/10%10), byte('0'+t%10))
}

// digits is at least the number of decimal digits of n >= 0, and at most
// one more: 1233/4096 is log10(2) within 5e-6, close enough below 2^64.
func digits(n int64) int {
	return bits.Len64(uint64(n))*1233>>12 + 1
}

// now reads the store's clock: the system clock with one monotonic read
// (see fastClock), or the Clock the store was given.
func (f *fastRule) now() int64 {
	if f.system {
		return systemFastClock.unixNano()
	}
	return f.ms.Clock.Now().UnixNano()
}
