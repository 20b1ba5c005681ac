package ratelimitclient

import (
	"math"
	"time"
)

// A server that counts in a sliding log gives its quota back one send at a
// time, a window after each was made: its reset is when the oldest send
// leaves the window, not when the whole quota comes back. Taking such a
// reset as the quota restored makes the client wait a window for every
// response that finds the log full (at 100 a second, nearly every one),
// though a unit comes back every hundredth of a second; and a send delayed
// by its jitter leaves the log a little later than the pace assumed, so
// that the send a window later finds the log full.
//
// The client cannot tell a sliding log from a window that resets, but it
// can keep its own: a send is within any server's limit of q per window w
// (fixed windows, windows that start at the first request, sliding logs and
// token buckets of burst q alike) when no window of length w holds more
// than q of the sends counted against it. The partition keeps the times of
// its latest sends, and a policy whose quota is small enough to be kept
// spaces each send at least w after the q-th latest, instead of waiting for
// its reset once its quota is spent.
//
// Waiting for the log instead of the reset holds only while the server
// counts no sends but the client's: each response to a send is checked
// against the log (the server's count, the quota less what is left, must
// not exceed the sends the log holds in the window before that send). A
// policy whose server gave its window and counts more (other clients share
// the quota) is never paced by the log again; a window guessed from resets
// is lengthened to what the server shows it counting.

// maxLogged is the largest quota a policy may have for the log to pace it,
// and the number of sends the log keeps.
const maxLogged = 256

// sendLog holds the times of a partition's latest sends (the slots they
// were given, with their jitter), sorted by time: a ring of the maxLogged
// latest, oldest first from head.
type sendLog struct {
	at   [maxLogged]mono // slot times
	seq  [maxLogged]uint64
	head int
	n    int
	from mono   // the log holds every send made after this time
	last uint64 // the highest send number it was given
}

// newSendLog returns a log that holds every send made after now and, when
// there were at most maxLogged, the sent sends made before it, numbered 1 to
// sent, each at now: sends that went before the first response told of a
// policy (no later than now, so that the log errs late).
func newSendLog(now mono, sent uint64) *sendLog {
	l := &sendLog{from: now, last: sent}
	if sent > maxLogged {
		return l
	}
	for seq := range sent {
		l.add(seq+1, now)
	}
	l.from = math.MinInt64
	return l
}

// i is the ring position of the k-th entry, oldest first.
func (l *sendLog) i(k int) int { return (l.head + k) % maxLogged }

// admit records that the send numbered seq, admitted at now, was given
// the slot at; and the sends numbered between the last it was given and
// seq, at now: they went without waiting, before the partition's fields
// were read (see Transport.reserve), and no later than now.
func (l *sendLog) admit(seq uint64, now, at mono) {
	for s := max(l.last+1, seq-min(seq, maxLogged)); s < seq; s++ {
		l.add(s, now)
	}
	l.add(seq, at)
}

// add records that the send numbered seq was given the slot at.
func (l *sendLog) add(seq uint64, t mono) {
	l.last = max(l.last, seq)
	if l.n == maxLogged {
		if t < l.at[l.head] {
			return // earlier than every send kept
		}
		l.from = max(l.from, l.at[l.head])
		l.head, l.n = l.i(1), l.n-1
	}
	// Slots mostly come in order: insert from the end.
	k := l.n
	for ; k > 0 && l.at[l.i(k-1)] > t; k-- {
		l.at[l.i(k)], l.seq[l.i(k)] = l.at[l.i(k-1)], l.seq[l.i(k-1)]
	}
	l.at[l.i(k)], l.seq[l.i(k)] = t, seq
	l.n++
}

// remove forgets the send numbered seq, when the log holds it.
func (l *sendLog) remove(seq uint64) {
	for k := l.n - 1; k >= 0; k-- {
		if l.seq[l.i(k)] != seq {
			continue
		}
		for ; k+1 < l.n; k++ {
			l.at[l.i(k)], l.seq[l.i(k)] = l.at[l.i(k+1)], l.seq[l.i(k+1)]
		}
		l.n--
		return
	}
}

// sentAt returns the slot of the send numbered seq, when the log holds it.
func (l *sendLog) sentAt(seq uint64) (mono, bool) {
	for k := l.n - 1; k >= 0; k-- { // responses mostly follow recent sends
		if l.seq[l.i(k)] == seq {
			return l.at[l.i(k)], true
		}
	}
	return 0, false
}

// count returns how many sends the log holds in (from, to].
func (l *sendLog) count(from, to mono) int64 {
	var n int64
	for k := l.n - 1; k >= 0 && l.at[l.i(k)] > from; k-- {
		if l.at[l.i(k)] <= to {
			n++
		}
	}
	return n
}

// next returns the earliest time a further send leaves at most q sends in
// any window of length w: w after the q-th latest (zero when the log holds
// fewer than q).
func (l *sendLog) next(q int64, w time.Duration) mono {
	if q > int64(l.n) || q <= 0 {
		return 0
	}
	return l.at[l.i(l.n-int(q))].add(w)
}

// logged reports whether p's sends are kept within the log: its quota and
// window are known, the log can hold its quota, and no response showed its
// server counting sends the log does not hold. Sends are kept within it
// from the start (it only delays them), but they wait for the log instead
// of the reset only once a response showed the server counting no more
// than the log holds (logFit).
func (p *policy) logged() bool {
	return !p.logOff && p.known() && p.limit <= maxLogged
}

// checkLog checks the response to the send numbered seq, which left
// remaining of p's quota, against the log l: the server may have counted
// at most the sends the log holds in the window before that send. When it
// counted more and p's window is a guess, the window is longer than the
// guess, by as much as the log shows if the server counts only the
// client's sends: the guess is raised, to be checked again. When the
// server gave the window, it counts sends other than the client's.
func (p *policy) checkLog(l *sendLog, seq uint64, remaining int64) {
	if l == nil || !p.logged() {
		return
	}
	w := p.logWindow()
	at, ok := l.sentAt(seq)
	if !ok || at.add(-w) < l.from {
		return // the log does not hold every send of the window before it
	}
	counted := p.limit - remaining
	if counted <= l.count(at.add(-w), at) {
		p.logFit = true
		return
	}
	p.logFit = false
	if !p.guessed {
		p.logOff = true
		return
	}
	// The window holds the counted-th latest send at or before this one
	// (or, when the log holds fewer, sends made before it was kept): it is
	// longer than the time since, in whole seconds.
	oldest, ok := l.latest(counted, at)
	if !ok && l.from == math.MinInt64 {
		p.logOff = true // more than the client ever sent: other clients count too
		return
	}
	if !ok {
		oldest = l.from
	}
	longer := at.sub(oldest).Truncate(time.Second) + time.Second
	p.least, p.exact, p.window = max(p.least, longer), max(p.exact, longer), max(p.window, longer)
}

// logWindow is the window p's sends are kept within in the log: the one the
// server gave, or, when the window is a guess, the shortest it can be (the
// whole seconds before a reset); a server counting more sends than the log
// holds in it lengthens it (see checkLog).
func (p *policy) logWindow() time.Duration {
	if p.guessed && p.least > 0 {
		return p.least
	}
	return p.window
}

// latest returns the time of the n-th latest send at or before at.
func (l *sendLog) latest(n int64, at mono) (mono, bool) {
	for k := l.n - 1; k >= 0; k-- {
		if t := l.at[l.i(k)]; t <= at {
			if n--; n == 0 {
				return t, true
			}
		}
	}
	return 0, false
}
