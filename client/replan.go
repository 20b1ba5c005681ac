package ratelimitclient

import (
	"cmp"
	"slices"
)

// A send waiting for its slot keeps the slot it was given, on the picture
// of the server's limits at the time. When a response shows that picture
// too slow, the sends still waiting are given their slots again, in the
// order of the slots they had, as if they were admitted now: when a guessed
// window reads shorter than it was read (a Unix-time reset read from one
// Date guesses the window from the Date to the reset, twice too long for a
// window of a second that began at the first request), and when a
// throttle's Retry-After says a quota it finds spent is back sooner than
// its reset (read from whole seconds, the reset can be a second late).

// waiter is a send waiting for its slot. A send keeps its waiter from
// reserve to its wake, so that it finds its slot and leaves the waiting
// sends without looking at the others: with thousands queued behind a
// throttle, a wake costs what it costs with one.
type waiter struct {
	seq   uint64
	slot  mono          // guarded by the partition's mu
	at    int           // index in the partition's waiters, -1 once it left them; guarded by mu
	moved chan struct{} // signalled, with a buffer of one, when replan gives the send another slot
}

// waitWork counts what the sends waiting for their slot cost under their
// partition's lock: the times they took it, and the waiters looked at
// while holding it. Tests bound them per send.
type waitWork struct{ locks, visits uint64 }

// addWaiter registers the send numbered seq, given slot, as waiting, and
// returns its waiter. The caller holds p.mu.
func (p *partition) addWaiter(seq uint64, slot mono) *waiter {
	w := &waiter{seq: seq, slot: slot, at: len(p.waiters), moved: make(chan struct{}, 1)}
	p.waiters = append(p.waiters, w)
	return w
}

// slotOf returns the slot of w, which replan may have changed.
func (p *partition) slotOf(w *waiter) mono {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.work.locks++
	return w.slot
}

// leave removes w, when not nil, from the waiting sends, if it is still
// among them: the last takes its place. The caller holds p.mu.
func (p *partition) leave(w *waiter) {
	if w == nil || w.at < 0 {
		return
	}
	last := len(p.waiters) - 1
	p.waiters[w.at] = p.waiters[last]
	p.waiters[w.at].at = w.at
	p.waiters[last] = nil
	p.waiters = p.waiters[:last]
	w.at = -1
}

// replan gives every send still waiting at now its slot again, on the
// policies as they are now. Each policy gets back the sends it counted for
// them (those after the response it was last read from), and paces the
// first from now rather than from the last of them. A policy whose quota or
// window is not known does not count a send that waits for its reset, so
// that with one, the sends keep their slots. The caller holds p.mu.
func (p *partition) replan(now mono) {
	p.work.visits += uint64(len(p.waiters))
	ws := p.waiters[:0]
	for _, w := range p.waiters {
		if w.slot <= now {
			w.at = -1 // its slot has come: it leaves
			continue
		}
		w.at = len(ws)
		ws = append(ws, w)
	}
	clear(p.waiters[len(ws):])
	p.waiters = ws
	if len(ws) == 0 || p.usesLocal() {
		return
	}
	for i := range p.policies {
		if p.policies[i].active && !p.policies[i].known() {
			return // its waiting sends were not all counted: nothing to give back
		}
	}
	// In the order of their slots, and of their admission for equal ones.
	slices.SortFunc(ws, func(a, b *waiter) int { return cmp.Or(cmp.Compare(a.slot, b.slot), cmp.Compare(a.seq, b.seq)) })
	for i, w := range ws {
		w.at = i
	}
	for i := range p.policies {
		q := &p.policies[i]
		for _, w := range ws {
			if w.seq > q.seq {
				q.rem++
			}
		}
		q.last = min(q.last, now)
	}
	for _, w := range ws {
		if p.log != nil {
			p.log.remove(w.seq)
		}
	}
	for _, w := range ws {
		slot, _, _ := plan(p, now)
		p.commit()
		if p.log != nil {
			p.log.add(w.seq, max(slot, now))
		}
		w.slot = slot
		select {
		case w.moved <- struct{}{}:
		default: // signalled already, and not yet seen
		}
	}
}
