package ratelimit

import (
	"context"
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"
)

// Pace makes a GCRA rule delay requests to its rate instead of rejecting
// them: a request that does not fit now takes the next free moment, at most
// MaxDelay ahead, and is served then. Requests that would wait longer are
// rejected at once (429, with the wait they would have needed as
// Retry-After), as are those beyond the waiting bounds unless they fit
// without waiting. A waiting request whose context ends (the client left,
// the server shuts down) gives its place back exactly and is not served.
//
// The wait of a request is bounded by its context's deadline too: one that
// cannot be served before it is rejected at once, not left to time out.
// Waiting costs a timer and the request's own goroutine, nothing more.
// A paced rule is its limiter's only enforced rule: another rule would
// count the request when it is decided, not when it is served. Put other
// rules in a limiter inside the paced one, so that they decide when the
// request's turn comes. Giving back a reservation that later ones follow
// leaves its turn empty rather than handing it to a newcomer (two requests
// would share the later one's turn); see docs/shaping.md.
//
// The zero value paces nothing. See docs/shaping.md for how the settings
// map to nginx's limit_req (burst, nodelay, delay).
type Pace struct {
	// MaxDelay is the longest a request may wait for its turn; zero
	// disables pacing.
	MaxDelay time.Duration

	// MaxWaiting bounds the requests of the rule waiting at once in this
	// process, counted from their store call to the end of their wait; zero
	// means 1024. A request beyond it is served only if it fits without
	// waiting.
	MaxWaiting int

	// MaxWaitingPerKey bounds the waiting requests of one key; zero means
	// no bound but MaxWaiting (the rule's limit already spaces a key's
	// requests: at most MaxDelay/Interval of them wait).
	MaxWaitingPerKey int
}

// defaultMaxWaiting is Pace.MaxWaiting when zero.
const defaultMaxWaiting = 1024

func validatePace(p Pace, where string) {
	if p.MaxDelay < 0 || p.MaxWaiting < 0 || p.MaxWaitingPerKey < 0 {
		panic(fmt.Sprintf("ratelimit: %s: negative MaxDelay or bound in %+v", where, p))
	}
}

// pacer counts a paced rule's waiting requests, in all and per key.
type pacer struct {
	maxDelay time.Duration
	max      int64
	perKey   int64 // 0: no bound per key
	waiting  atomic.Int64
	seed     maphash.Seed
	shards   [16]keyCounts // only with a bound per key
}

type keyCounts struct {
	mu sync.Mutex
	n  map[string]int64
}

func newPacer(p Pace) *pacer {
	pc := &pacer{maxDelay: p.MaxDelay, max: int64(p.MaxWaiting), perKey: int64(p.MaxWaitingPerKey), seed: maphash.MakeSeed()}
	if pc.max == 0 {
		pc.max = defaultMaxWaiting
	}
	return pc
}

// enter takes a waiting place for key and reports whether there was one.
func (pc *pacer) enter(key string) bool {
	if pc.waiting.Add(1) > pc.max {
		pc.waiting.Add(-1)
		return false
	}
	if pc.perKey == 0 {
		return true
	}
	kc := &pc.shards[maphash.String(pc.seed, key)%uint64(len(pc.shards))]
	kc.mu.Lock()
	defer kc.mu.Unlock()
	if kc.n[key] >= pc.perKey {
		pc.waiting.Add(-1)
		return false
	}
	if kc.n == nil {
		kc.n = map[string]int64{}
	}
	kc.n[key]++
	return true
}

// leave gives back key's waiting place.
func (pc *pacer) leave(key string) {
	pc.waiting.Add(-1)
	if pc.perKey == 0 {
		return
	}
	kc := &pc.shards[maphash.String(pc.seed, key)%uint64(len(pc.shards))]
	kc.mu.Lock()
	if kc.n[key]--; kc.n[key] <= 0 {
		delete(kc.n, key)
	}
	kc.mu.Unlock()
}

// horizon is how far ahead a request with context ctx may be served at
// now: the pace's MaxDelay, cut to the context's deadline.
func (pc *pacer) horizon(ctx context.Context) time.Duration {
	d := pc.maxDelay
	if deadline, ok := ctx.Deadline(); ok {
		d = min(d, max(0, time.Until(deadline)))
	}
	return d
}

// enterPace gives each paced rule of rvs a waiting place, if one is free,
// and the horizon its store may reserve within: without a place the rule
// admits only what fits now.
func (l *Limiter) enterPace(d *decision, rvs []ruleVerdict) {
	for i := range rvs[:d.enforced] {
		rv := &rvs[i]
		if pc := rv.ru.pacer; pc != nil && pc.enter(rv.req.Key) {
			rv.waiting = true
			rv.req.MaxDelay = pc.horizon(d.ctx)
		}
	}
}

// leavePace gives back the waiting places enterPace took.
func leavePace(d *decision, rvs []ruleVerdict) {
	for i := range rvs[:d.enforced] {
		if rv := &rvs[i]; rv.waiting {
			rv.ru.pacer.leave(rv.req.Key)
			rv.waiting = false
		}
	}
}

// wait holds an admitted request until the moment its paced rule reserved
// for it, never longer than the rule let the store reserve (whatever a
// store answers), and returns how long it waited. It reports false, having
// given every reservation back, when d's context ends first.
func (l *Limiter) wait(d *decision, rvs []ruleVerdict) (time.Duration, bool) {
	var delay time.Duration
	for i := range rvs[:d.enforced] {
		if rv := &rvs[i]; rv.state == decided && rv.ru.pacer != nil {
			delay = max(delay, min(rv.res.Delay, rv.req.MaxDelay))
		}
	}
	if delay <= 0 {
		return 0, true
	}
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
		return delay, true
	case <-d.ctx.Done():
	}
	for i := range rvs {
		rv := &rvs[i]
		if rv.state == decided && rv.res.Allowed && rv.req.Cost > 0 {
			l.release(context.WithoutCancel(d.ctx), d.r, rv.ru, rv.store(), rv.req, rv.res.Slot)
			rv.state = consumed
		}
	}
	return 0, false
}
