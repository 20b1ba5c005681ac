package ratelimitclient

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestSendLogKeepsAnyWindowWithinTheQuota: sends added in any order (a
// jittered send comes after the ones paced behind it) are placed so that
// no window of length w holds more than q of them: the next goes w after
// the q-th latest by time, not by the order they were added in. A send
// jittered from 100 ms to 141 ms moves the send a window after it from
// 1.1 s to 1.141 s: a sliding log of 10 a second refuses it at 1.1 s.
func TestSendLogKeepsAnyWindowWithinTheQuota(t *testing.T) {
	t0 := mono(time.Hour)
	ms := func(n int) mono { return t0.add(time.Duration(n) * time.Millisecond) }
	l := newSendLog(t0, 0)
	for i, at := range []int{0, 200, 300, 141, 400, 500, 600, 700, 800, 900, 1000} {
		l.add(uint64(i+1), ms(at))
	}
	if got, want := l.next(10, time.Second), ms(1141); got != want {
		t.Errorf("next send at %v, want %v (a window after the jittered send)", got.sub(t0), want.sub(t0))
	}

	rng := rand.New(rand.NewPCG(1, 2))
	const q, w = 7, time.Second
	l = newSendLog(t0, 0)
	var sent []mono
	at := t0
	for i := range 500 {
		at = at.add(time.Duration(rng.Int64N(int64(300 * time.Millisecond))))
		slot := max(at, l.next(q, w))
		slot = slot.add(time.Duration(rng.Int64N(int64(50 * time.Millisecond)))) // jitter
		l.add(uint64(i+1), slot)
		sent = append(sent, slot)
	}
	slices.Sort(sent)
	for i := q; i < len(sent); i++ {
		if gap := sent[i].sub(sent[i-q]); gap < w {
			t.Fatalf("sends %d and %d are %v apart: %d sends within a window of %v, want at most %d", i-q, i, gap, q+1, w, q)
		}
	}
}

// TestSendLogCheckedAgainstEachResponse: a policy whose server counts, in
// the window before a send, no more sends than the log holds is paced by
// the log; one whose server counts more (other clients share its quota)
// never is again, even after responses that fit; a guessed window that
// the server shows too short is lengthened to hold the sends it counted
// (back to when the log was started, when it holds fewer), and the log
// still paces it; but not past every send the client ever made.
func TestSendLogCheckedAgainstEachResponse(t *testing.T) {
	t0 := mono(time.Hour)
	l := newSendLog(t0, maxLogged+1) // more sent before t0 than it holds: it holds those after
	for i := range 20 {              // 10 a second from 0.1 s to 2 s
		l.add(uint64(i+1), t0.add(time.Duration(i+1)*100*time.Millisecond))
	}

	given := policy{active: true, limit: 10, window: time.Second}
	given.checkLog(l, 20, 0) // 10 counted in (1 s, 2 s]: the log holds them
	if !given.logFit || !given.logged() {
		t.Fatalf("after a response counting the sends of the log: logFit %v, logged %v; want both", given.logFit, given.logged())
	}
	shared := given
	shared.checkLog(l, 15, 0) // 10 counted in (0.5 s, 1.5 s], where the log holds 10: fits
	shared.checkLog(l, 16, 0) // and (0.6 s, 1.6 s]: fits
	shared.limit = 12
	shared.checkLog(l, 20, 0) // 12 counted, 10 in the log: others count too
	shared.limit = 10
	shared.checkLog(l, 20, 0)
	if shared.logged() || shared.logFit {
		t.Errorf("after a response counting more sends than the log holds: logged %v, logFit %v; want never again", shared.logged(), shared.logFit)
	}

	guessed := policy{active: true, limit: 15, window: time.Second, guessed: true, least: time.Second, exact: time.Second}
	guessed.checkLog(l, 20, 0) // 15 counted at 2 s: the 15th latest is at 0.6 s
	if guessed.logOff {
		t.Fatalf("a guessed window shown too short turned the log off; want it lengthened")
	}
	if got, want := guessed.logWindow(), 2*time.Second; got != want {
		t.Errorf("guessed window after the server counted 15 sends over 1.4 s: %v, want %v", got, want)
	}
	guessed.checkLog(l, 20, 0)
	if !guessed.logFit {
		t.Errorf("the lengthened window does not fit the same response")
	}

	// 30 counted where the log, kept from t0, holds 20: the server counts
	// sends made before the log was kept, and its window reaches past t0.
	before := policy{active: true, limit: 30, window: time.Second, guessed: true, least: time.Second, exact: time.Second}
	before.checkLog(l, 20, 0)
	if before.logOff || before.logWindow() != 3*time.Second {
		t.Errorf("a server counting sends from before the log: logOff %v, window %v; want the window lengthened to 3s", before.logOff, before.logWindow())
	}

	// A log started with the 3 sends made before it holds every send: 30
	// counted where the client made 23 is other clients' sends.
	all := newSendLog(t0, 3)
	for i := range 20 {
		all.add(uint64(i+4), t0.add(time.Duration(i+1)*100*time.Millisecond))
	}
	everything := policy{active: true, limit: 30, window: time.Second, guessed: true, least: time.Second, exact: time.Second}
	everything.checkLog(all, 23, 0)
	if !everything.logOff {
		t.Errorf("a server counting more sends than the client ever made: log still used; want it off")
	}
}

// TestSendLogHoldsSendsMadeBeforeItWasKept: the requests that go before
// the first response (and those that race it) are admitted without the
// log; the log holds them all the same, at the time it learns of them (no
// earlier than they went), so that the sends after them keep the window:
// a server of 4 a second that saw 3 sends at 0 s refuses a fifth before
// 1 s, and a log without them let it go at once.
func TestSendLogHoldsSendsMadeBeforeItWasKept(t *testing.T) {
	t0 := mono(time.Hour)
	l := newSendLog(t0, 2) // sends 1 and 2 went before the first response
	l.admit(4, t0, t0)     // send 3 went without waiting, racing it
	if got, want := l.next(4, time.Second), t0.add(time.Second); got != want {
		t.Errorf("after 4 sends at 0 s, a fifth of 4 a second at %v, want %v", got.sub(t0), want.sub(t0))
	}
	if n := l.count(l.from, t0); n != 4 {
		t.Errorf("the log holds %d sends, want 4", n)
	}
}
