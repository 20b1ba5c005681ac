package memstore

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"
)

// slots is the state of a Concurrency key: one entry per acquisition still
// in flight, each with its own deadline, so that a slot whose holder never
// returns it expires a Period after it was taken even while other
// acquisitions continue.
//
// Entries are kept in the order they were taken, which is also the order of
// their deadlines (a deadline is never earlier than the one before it) and
// of their tokens (drawn from a per-shard counter that only grows). So the
// soonest deadline is at the front and a token is found by binary search.
// A released entry becomes a tombstone (cost 0); tombstones at either end
// are dropped at once and the queue is compacted when they make up half of
// it, so every operation is amortised O(1) apart from the O(log n) search.
type slots struct {
	// mu guards the fields below it while the queue is its shard's hot
	// one (see cshard); otherwise the shard's lock does. What an
	// acquisition of a hot queue changes, and the returned box that its
	// releases write, share mu's cache line.
	mu sync.Mutex
	// returned is the token of a slot given back without mu while the
	// queue was hot, not yet applied, or 0 (see Held). It is applied by
	// the next holder of mu that acts on the hot queue, or by demote.
	returned atomic.Uint64
	q        []slot
	head     int32 // q[:head] are gone
	dead     int32 // tombstones in q[head:]
	inflight int64 // units held by the live entries
	// last is the latest deadline ever taken: the key is kept until then
	// even when every slot was returned, so that a busy key does not
	// allocate its queue again on every acquisition. A hot queue, which
	// is kept while hot (see cshard), has no use for it, and keeps in it
	// instead hotMark and the last token it drew (see hotNext): so a
	// queue is one cache line, and a hot one reads as never expiring.
	last int64
}

// hotMark is the sign bit of a hot queue's last. A deadline is never
// negative there: last starts at 0 and takes only later deadlines.
const hotMark = math.MinInt64

// hotNext is the last token a hot queue drew from its block (see
// cshard.end).
func (s *slots) hotNext() uint64 { return uint64(s.last &^ hotMark) }

// setHotNext records next as the last token a hot queue drew.
func (s *slots) setHotNext(next uint64) { s.last = hotMark | int64(next) }

type slot struct {
	deadline int64
	token    uint64
	cost     int64 // 0 once released
}

func (s *slots) expiry() int64 {
	if s.last < 0 { // hot: kept while hot
		return math.MaxInt64
	}
	return s.last
}

// resetAt is when every slot now held will have expired (the back entry is
// always live), or 0 when none is held.
func (s *slots) resetAt() int64 {
	if int(s.head) == len(s.q) {
		return 0
	}
	return s.q[len(s.q)-1].deadline
}

// concurrencyRetryHint is the RetryAfter of a denied Concurrency request:
// slots free up when requests finish, which no store can predict, so clients
// are told to come back in a second (or when enough slots expire, if sooner).
const concurrencyRetryHint = 1e9

// retryScan bounds how many entries a denial looks at to find when enough
// slots expire; past it, the hint stands.
const retryScan = 64

// expire drops the entries whose deadline has passed and the tombstones at
// either end.
func (s *slots) expire(now int64) {
	for int(s.head) < len(s.q) && (s.q[s.head].deadline <= now || s.q[s.head].cost == 0) {
		e := &s.q[s.head]
		if e.cost == 0 {
			s.dead--
		} else {
			s.inflight -= e.cost
		}
		s.head++
	}
	for n := len(s.q); n > int(s.head) && s.q[n-1].cost == 0; n = len(s.q) {
		s.dead--
		s.q = s.q[:n-1]
	}
	switch live := len(s.q) - int(s.head); {
	case live == 0:
		s.q, s.head = s.q[:0], 0
		if s.roomy(0) {
			s.q = nil
		}
	case s.dead > 8 && 2*int(s.dead) > live || s.head > 32 && 2*int(s.head) > len(s.q), s.roomy(live):
		s.compact()
	}
}

// compact moves the live entries to the front of q.
func (s *slots) compact() {
	n := 0
	for _, e := range s.q[s.head:] {
		if e.cost != 0 {
			s.q[n] = e
			n++
		}
	}
	clear(s.q[n:])
	s.q, s.head, s.dead = s.q[:n], 0, 0
	if s.roomy(n) {
		s.q = slices.Clone(s.q)
	}
}

// roomy reports whether q's array, holding n entries, is to be given back:
// past maxIdleSlots, once the entries fill less than a quarter of it. A key
// then holds memory for what it has in flight (24 bytes an entry), not for
// the most it ever had.
func (s *slots) roomy(n int) bool { return cap(s.q) > maxIdleSlots && 4*n < cap(s.q) }

// maxIdleSlots is the most entries whose room a queue keeps however few it
// holds: a key whose acquisitions come and go by the few keeps its array
// and takes them without allocating.
const maxIdleSlots = 16

// take acquires cost slots at now out of l.Rate, drawing the token from seq.
func (s *slots) take(now int64, l Limit, cost int64, seq *uint64) Result {
	s.expire(now)
	need := max(cost, 1)
	if s.inflight+need > l.Rate {
		return Result{
			Remaining:  max(0, l.Rate-s.inflight),
			RetryAfter: s.retryAfter(now, need, l.Rate),
			ResetAfter: s.resetAt() - now,
		}
	}
	if cost == 0 {
		return Result{Allowed: true, Remaining: l.Rate - s.inflight, ResetAfter: max(0, s.resetAt()-now)}
	}
	deadline := now + l.Period
	if int(s.head) < len(s.q) {
		deadline = max(deadline, s.q[len(s.q)-1].deadline)
	}
	*seq++
	s.q = append(s.q, slot{deadline: deadline, token: *seq, cost: cost})
	if s.last >= 0 && deadline > s.last { // a hot queue's stays: see last
		s.last = deadline
	}
	s.inflight += cost
	return Result{Allowed: true, Remaining: l.Rate - s.inflight, ResetAfter: deadline - now, Slot: *seq}
}

// retryAfter is how long until need units fit as slots expire, at most the hint.
func (s *slots) retryAfter(now, need, rate int64) int64 {
	held := s.inflight
	for i := int(s.head); i < len(s.q) && i < int(s.head)+retryScan; i++ {
		held -= s.q[i].cost
		if held+need <= rate {
			return min(concurrencyRetryHint, s.q[i].deadline-now)
		}
	}
	return concurrencyRetryHint
}

// release gives back the slots named by token, or with token zero the cost
// slots that would expire soonest. A token of slots that have expired or
// were released already releases nothing.
//
// The key's entry in its table needs no update afterwards: the queue is
// changed in place, and its expiry (last) does not move.
func (s *slots) release(now int64, token uint64, cost int64) {
	if token != 0 {
		// An entry found expired but not yet dropped is released as
		// expire would drop it: its cost leaves inflight once either way.
		if i := s.find(token); i >= 0 && s.q[i].cost != 0 {
			s.inflight -= s.q[i].cost
			s.q[i].cost = 0
			s.dead++
		}
	} else {
		s.expire(now) // the units to give back are live ones
		for i := int(s.head); i < len(s.q) && cost > 0; i++ {
			e := &s.q[i]
			if e.cost == 0 {
				continue
			}
			n := min(e.cost, cost)
			e.cost -= n
			s.inflight -= n
			cost -= n
			if e.cost == 0 {
				s.dead++
			}
		}
	}
	s.expire(now)
}

// applyReturned applies the release left in returned, if any. The caller
// holds mu (or the shard's lock, the queue no longer hot).
func (s *slots) applyReturned(now int64) {
	if s.returned.Load() == 0 {
		return
	}
	if token := s.returned.Swap(0); token != 0 {
		s.release(now, token, 0)
	}
}

// find returns the index of token in q, or -1.
func (s *slots) find(token uint64) int {
	lo, hi := int(s.head), len(s.q)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if s.q[m].token < token {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(s.q) && s.q[lo].token == token {
		return lo
	}
	return -1
}

// undo removes the entry of token, the last one taken (TakeAll's rollback).
func (s *slots) undo(token uint64) {
	if n := len(s.q); n > int(s.head) && s.q[n-1].token == token {
		s.inflight -= s.q[n-1].cost
		s.q = s.q[:n-1]
	}
	for n := len(s.q); n > int(s.head) && s.q[n-1].cost == 0; n = len(s.q) {
		s.dead--
		s.q = s.q[:n-1]
	}
}
