package ratelimit

import (
	"net/http"

	"github.com/sluicehq/ratelimit/adaptive"
	"github.com/sluicehq/ratelimit/internal/request"
)

// The adaptive step of the request path: a request takes a slot under each
// adaptive rule (enterAdaptive), runs, and gives the slots back with its
// outcome (adaptiveHeld.release). It locks nothing and allocates nothing;
// the controllers read the clock only for the requests they time.

// adaptiveHeld is one adaptive slot a request holds, and the rule state it
// was taken from; the zero adaptiveHeld holds nothing.
type adaptiveHeld struct {
	s      *adaptiveSet
	ticket adaptive.Ticket
}

// adaptiveStop is why the adaptive step stopped a request: its rule
// rejected it at lim's limit (verdictAdaptive), or could not key it
// (verdictKeyError, err). The zero adaptiveStop lets the request go on.
type adaptiveStop struct {
	kind verdictKind
	ru   *rule
	lim  *adaptive.Limiter
	err  error
}

// enterAdaptive is the step of the adaptive rule ru for r: it takes a slot
// of the controller of r's key (h), lets r pass without one (a shadow
// rule's rejection or key error: h is zero), or stops it, setting *stop,
// the caller's zero adaptiveStop. The stop is written through a pointer
// rather than returned: the slot alone comes back in registers, the two
// together would not fit and would come back through memory, a cost on
// every admitted request.
func (l *Limiter) enterAdaptive(r *http.Request, ru *rule, stop *adaptiveStop) (h adaptiveHeld) {
	s := ru.adaptive.Load()
	key, err := ru.Key(r)
	var lim *adaptive.Limiter
	switch {
	case err == nil:
		lim = s.limiter(compactKey(key))
	case ru.Shadow:
		l.observers.observe(Event{Rule: ru.Name, KeyKind: ru.KeyKind, Outcome: OutcomeKeyError, Err: err, Request: r})
		return h
	case !ru.onKeyError.Shared:
		l.observers.observe(Event{Rule: ru.Name, KeyKind: ru.KeyKind, Outcome: OutcomeKeyError, Err: err, Request: r})
		*stop = adaptiveStop{kind: verdictKeyError, ru: ru, err: err}
		return h
	default:
		lim = s.sharedLimiter()
	}
	h, ok := s.take(r, lim)
	switch {
	case ok:
		if len(l.observers) > 0 {
			l.observeAdmitted(r, ru, h, lim)
		}
		return h
	case ru.Shadow:
		l.observers.result(r, ru, adaptiveResult(lim, false), OutcomeShadowDenied, 0)
		return adaptiveHeld{}
	}
	*stop = adaptiveStop{kind: verdictAdaptive, ru: ru, lim: lim}
	return adaptiveHeld{}
}

// observeAdmitted reports r's admission under ru to the observers, giving
// the slot h back if one of them panics: the caller never got to hold it.
func (l *Limiter) observeAdmitted(r *http.Request, ru *rule, h adaptiveHeld, lim *adaptive.Limiter) {
	observed := false
	defer func() {
		if !observed {
			h.release(r, false, 0)
		}
	}()
	l.observers.result(r, ru, adaptiveResult(lim, true), OutcomeDenied, 0)
	observed = true
}

// verdict is the verdict on r that stop stands for; a rejection is
// reported to the observers.
func (stop *adaptiveStop) verdict(l *Limiter, r *http.Request) Verdict {
	if stop.kind == verdictKeyError {
		return Verdict{l: l, r: r, kind: verdictKeyError, top: stop.ru, err: stop.err}
	}
	res := adaptiveResult(stop.lim, false)
	l.observers.result(r, stop.ru, res, OutcomeDenied, 0)
	return Verdict{l: l, r: r, kind: verdictAdaptive, top: stop.ru, res: res, limit: res.Limit}
}

// take takes a slot of lim, the controller of r's key under the rule s.
// The clock is read only when the request is timed (see timeAll).
func (s *adaptiveSet) take(r *http.Request, lim *adaptive.Limiter) (adaptiveHeld, bool) {
	critical := s.cfg.Critical == nil || s.cfg.Critical(r)
	var tk adaptive.Ticket
	var ok bool
	if s.timeAll {
		tk, ok = lim.AcquireAt(s.now(), critical)
	} else {
		tk, ok = lim.Acquire(critical)
	}
	return adaptiveHeld{s, tk}, ok
}

// release gives the slot back; sampled tells whether the request ran (its
// outcome is classified with status) or was stopped by another rule
// (ignored). The zero adaptiveHeld releases nothing.
func (h adaptiveHeld) release(r *http.Request, sampled bool, status int) {
	s := h.s
	switch {
	case s == nil:
	case !s.timeAll: // DefaultClassify, which ignores elapsed; the ticket knows whether it was timed
		v := adaptive.SampleIgnore
		if sampled && h.ticket.Timed() { // an untimed request's outcome is not recorded
			v = s.cfg.Classify(r, status, -1)
		}
		h.ticket.Release(v)
	default:
		now := s.now()
		v := adaptive.SampleIgnore
		if sampled {
			v = s.cfg.Classify(r, status, h.ticket.ElapsedAt(now))
		}
		h.ticket.ReleaseAt(now, v)
	}
}

// adaptiveDone holds a request's adaptive slots until it is released. It
// holds them by value (no pointer into itself), so that the caller's copy
// stays on the stack until hold copies it for an admitted request.
type adaptiveDone struct {
	r      *http.Request
	n      int             // slots held: inline's first ones, then more
	inline [2]adaptiveHeld // the slots of up to two adaptive rules
	more   []adaptiveHeld  // beyond two
}

func (d *adaptiveDone) add(h adaptiveHeld) {
	if h.s == nil {
		return
	}
	if d.n < len(d.inline) {
		d.inline[d.n] = h
	} else {
		d.more = append(d.more, h)
	}
	d.n++
}

// timed reports whether one of d's slots is timed (a nil d holds none):
// only then is the request's outcome, and so its status, wanted.
func (d *adaptiveDone) timed() bool {
	if d == nil {
		return false
	}
	for _, h := range d.inline[:min(d.n, len(d.inline))] {
		if h.ticket.Timed() {
			return true
		}
	}
	for _, h := range d.more {
		if h.ticket.Timed() {
			return true
		}
	}
	return false
}

// release frees every slot; sampled tells whether the request ran (its
// outcome is classified with status) or was stopped by another rule
// (ignored). A nil d holds nothing; a second release frees nothing.
func (d *adaptiveDone) release(sampled bool, status int) {
	if d == nil || d.n == 0 {
		return
	}
	n, more := d.n, d.more
	d.n, d.more = 0, nil
	for _, h := range d.inline[:min(n, len(d.inline))] {
		h.release(d.r, sampled, status)
	}
	for _, h := range more {
		h.release(d.r, sampled, status)
	}
}

// acquireAdaptive takes a slot under every adaptive rule into *d, the
// caller's. It reports whether the request was admitted; when a rule
// rejects the request or its key, it sets the verdict *v and gives back the
// slots taken. It does not allocate: the slots are copied to the heap only
// once the whole request is admitted (hold), or not at all (serveAdapting).
func (l *Limiter) acquireAdaptive(r *http.Request, v *Verdict, d *adaptiveDone) bool {
	d.r = r
	for _, ru := range l.adaptive {
		var stop adaptiveStop
		h := l.enterAdaptive(r, ru, &stop)
		if stop.kind != verdictPass {
			*v = stop.verdict(l, r)
			d.release(false, 0)
			return false
		}
		d.add(h)
	}
	return true
}

// adaptiveStep is the first step of the request path of a Limiter with
// adaptive rules, for Handler, ServeRoute and Admit: it takes a slot under
// each adaptive rule into *d, the caller's, or answers r (a 503, or the
// response to a key error) and reports false, holding nothing.
func (l *Limiter) adaptiveStep(w http.ResponseWriter, r *http.Request, d *adaptiveDone) bool {
	if len(l.adaptive) > 1 {
		return l.adaptiveRulesStep(w, r, d)
	}
	var stop adaptiveStop
	h := l.enterAdaptive(r, l.adaptive[0], &stop)
	if stop.kind != verdictPass {
		l.stopAdaptive(w, r, &stop)
		return false
	}
	d.r = r
	d.add(h)
	return true
}

// adaptiveRulesStep is adaptiveStep for several adaptive rules.
func (l *Limiter) adaptiveRulesStep(w http.ResponseWriter, r *http.Request, d *adaptiveDone) bool {
	var v Verdict
	taken := false
	defer func() {
		if !taken { // a KeyFunc, Critical or observer panicked: give back the slots held so far
			d.release(false, 0)
		}
	}()
	ok := l.acquireAdaptive(r, &v, d)
	taken = true
	if !ok {
		v.write(w)
	}
	return ok
}

// admitAfterAdaptive is the rest of the request path once the adaptive
// step has admitted r, holding the slot h or the slots d: the other rules,
// on their direct, stacked or general path (admitRules). When they stop r,
// or panic, the adaptive slots are given back unsampled.
func (l *Limiter) admitAfterAdaptive(w http.ResponseWriter, r *http.Request, h adaptiveHeld, d *adaptiveDone) (hd *held, ok bool) {
	defer func() {
		if !ok {
			h.release(r, false, 0)
			d.release(false, 0)
		}
	}()
	return l.admitRules(w, r, nil)
}

// serveAdapting is the middleware's request path for a Limiter with
// adaptive rules: the adaptive step, the other rules' steps, the handler,
// then the slots given back with the status it wrote. Nothing is
// allocated for the adaptive rules, whether the request is admitted or
// rejected: their slots stay on the stack, and a writer that does not
// report its status (net/http's) is recorded (see serveAdaptiveHolding).
func (l *Limiter) serveAdapting(w http.ResponseWriter, r *http.Request, next http.Handler, rt routing) {
	if l.skip(r, rt) {
		l.observers.observe(Event{Outcome: OutcomeSkipped, Request: r})
		next.ServeHTTP(w, r)
		return
	}
	if len(l.adaptive) > 1 {
		l.serveAdaptingRules(w, r, next)
		return
	}
	var stop adaptiveStop
	h := l.enterAdaptive(r, l.adaptive[0], &stop)
	if stop.kind != verdictPass {
		l.stopAdaptive(w, r, &stop)
		return
	}
	var hd *held
	if l.rules != nil {
		var ok bool
		if hd, ok = l.admitAfterAdaptive(w, r, h, nil); !ok {
			return
		}
	}
	l.serveAdaptiveHolding(w, r, next, h, nil, hd)
}

// serveAdaptingRules is serveAdapting for several adaptive rules.
func (l *Limiter) serveAdaptingRules(w http.ResponseWriter, r *http.Request, next http.Handler) {
	var d adaptiveDone
	if !l.adaptiveRulesStep(w, r, &d) {
		return
	}
	var hd *held
	if l.rules != nil {
		var ok bool
		if hd, ok = l.admitAfterAdaptive(w, r, adaptiveHeld{}, &d); !ok {
			return
		}
	}
	l.serveAdaptiveHolding(w, r, next, adaptiveHeld{}, &d, hd)
}

// admitAdapting is admitHeld for a Limiter with adaptive rules: the
// adaptive step, then the other rules, and what the request holds (its
// adaptive slots, and the other rules' holdings) in one held.
func (l *Limiter) admitAdapting(w http.ResponseWriter, r *http.Request) (*held, bool) {
	var d adaptiveDone
	if !l.adaptiveStep(w, r, &d) {
		return nil, false
	}
	var h *held
	if l.rules != nil {
		var ok bool
		if h, ok = l.admitAfterAdaptive(w, r, adaptiveHeld{}, &d); !ok {
			return nil, false
		}
	}
	if h == nil {
		h = &held{l: l, r: r}
	}
	h.adaptive, h.w = d, w
	return h, true
}

// stopAdaptive answers a request the adaptive step stopped: a rejection is
// written here, as Verdict.write would (503, the rejection's fields, the
// rule's problem body), unless a denied handler answers it. Apart, so that
// the admitted request's path does not make room for a Verdict.
//
//go:noinline
func (l *Limiter) stopAdaptive(w http.ResponseWriter, r *http.Request, stop *adaptiveStop) {
	if stop.kind != verdictAdaptive || l.denied != nil {
		v := stop.verdict(l, r)
		v.write(w)
		return
	}
	ru, s := stop.ru, stop.ru.adaptive.Load()
	limit := stop.lim.Limit()
	if len(l.observers) > 0 {
		l.observers.result(r, ru, adaptiveResult(stop.lim, false), OutcomeDenied, 0)
	}
	s.setRejectionFields(w.Header(), ru.quotedName, limit, l.headers, true)
	w.WriteHeader(http.StatusServiceUnavailable)
	w.Write(s.problem)
}

// serveAdaptiveHolding runs next for a request that holds the adaptive slot h or
// slots d and, from the other rules, hd (or nil), and gives them back with the
// status it wrote (500 if it panicked, whatever it wrote before). The
// status is wanted only when the request is timed (at high rates, one in
// up to 64 is): a writer that does not report its status is then wrapped
// in a recorder of its own, closed when next returns, so that a handler
// that keeps it writes nothing more through it, to any response.
func (l *Limiter) serveAdaptiveHolding(w http.ResponseWriter, r *http.Request, next http.Handler, h adaptiveHeld, d *adaptiveDone, hd *held) {
	var rec interface{ Status() int }
	var sw *request.StatusWriter
	if h.ticket.Timed() || d.timed() {
		var ok bool
		if rec, ok = w.(interface{ Status() int }); !ok {
			sw = request.NewStatusWriter(w)
			w, rec = sw, sw
		}
	}
	served := false
	defer func() { // open-coded: no allocation
		status := http.StatusInternalServerError
		switch {
		case sw != nil:
			if st := sw.Close(); served {
				status = st
			}
		case !served:
		case rec != nil:
			status = rec.Status()
		default:
			status = 0 // not wanted
		}
		h.release(r, true, status)
		d.release(true, status)
		if hd != nil {
			hd.done(status)
			l.recycle(hd)
		}
	}()
	if hd != nil {
		w = l.settleWriter(w, hd)
	}
	next.ServeHTTP(w, r)
	served = true
}
