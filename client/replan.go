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

// waiter is a send waiting for its slot.
type waiter struct {
	seq   uint64
	slot  mono
	moved chan struct{} // closed when replan gives the send another slot
}

// addWaiter registers the send numbered seq, given slot, as waiting. The
// caller holds p.mu.
func (p *partition) addWaiter(seq uint64, slot mono) {
	p.waiters = append(p.waiters, &waiter{seq: seq, slot: slot, moved: make(chan struct{})})
}

// waiting returns the slot of the waiting send numbered seq and a channel
// closed when it changes, or a nil channel when the send is not waiting.
func (p *partition) waiting(seq uint64) (mono, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, w := range p.waiters {
		if w.seq == seq {
			return w.slot, w.moved
		}
	}
	return 0, nil
}

// leave removes the send numbered seq from the waiting sends.
func (p *partition) leave(seq uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.waiters = slices.DeleteFunc(p.waiters, func(w *waiter) bool { return w.seq == seq })
}

// replan gives every send still waiting at now its slot again, on the
// policies as they are now. Each policy gets back the sends it counted for
// them (those after the response it was last read from), and paces the
// first from now rather than from the last of them. A policy whose quota or
// window is not known does not count a send that waits for its reset, so
// that with one, the sends keep their slots. The caller holds p.mu.
func (p *partition) replan(now mono) {
	ws := slices.DeleteFunc(p.waiters, func(w *waiter) bool { return w.slot <= now })
	p.waiters = ws
	if len(ws) == 0 || p.usesLocal() {
		return
	}
	for i := range p.policies {
		if p.policies[i].active && !p.policies[i].known() {
			return // its waiting sends were not all counted: nothing to give back
		}
	}
	slices.SortFunc(ws, func(a, b *waiter) int { return cmp.Compare(a.slot, b.slot) })
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
		close(w.moved)
		w.moved = make(chan struct{})
	}
}
