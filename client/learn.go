package ratelimitclient

import (
	"net/http"
	"time"
)

// A server that sends no rate-limit fields still says two things: which
// sends it refused, and, in a refusal's Retry-After, when it will accept
// again. The adaptive mode reads its rate from them instead of cutting its
// own by a fixed factor at each throttle and probing back up: each probe
// above the server's rate is a throttle, and at a window of a second each
// throttle's Retry-After costs up to a window's quota.
//
// The sends the server accepted between two throttles, over the time
// between them, are its rate when it counts as a bucket: drained at both,
// it refilled over that time, the first throttle's wait included. A server
// that counts in fixed windows aligned on its clock says more: a throttle's
// Date plus its Retry-After, in whole seconds, is the end of the window it
// came in, exactly, and that window held the server's whole quota; when the
// windows both throttles came in held as many of the client's sends, that
// is the quota and the window (see windows), and the client sends that many
// in each window from then on (see schedule.go).
//
// A rate read is never above what the server accepted: other clients on
// the quota, or a window the client did not spend, only lower it.

// learner is what the adaptive mode keeps to read the rate of a server that
// sends no fields. The caller holds the partition's lock.
type learner struct {
	at      time.Time             // when the latest throttle arrived; zero before the first
	until   time.Time             // when it ended, on the client's clock
	edge    time.Time             // when it ended on the server's clock, read from its Date
	ok      int64                 // sends made since until that were accepted
	undated bool                  // one of them had no Date
	secs    *[histSecs]int32      // them, by the second of their Date
	tails   *[learnSecs + 1]int32 // before that: how many came in each number of seconds before edge
	okSum   float64               // the sends accepted between throttles, the earlier halved at each
	spanSum float64               // and the seconds between the throttles, alike
	ceil    float64               // the rate read had one more send been accepted
	learned bool                  // a rate was read
	noSched bool                  // a window schedule was throttled: there is none for this server
}

// reading is what a learner read at a throttle.
type reading struct {
	rate   float64 // per second; 0 when none was read
	quota  int64   // a fixed window's quota, when fixed
	window int64   // and its length, in seconds
	fixed  bool    // the rate was read from fixed windows
}

const (
	// histSecs is how many seconds of accepted sends a learner keeps by
	// their Date, and learnSecs the longest window it reads from them.
	histSecs  = 128
	learnSecs = histSecs / 2

	// learnMargin is the share of the rate read over the time between
	// throttles that the client sends at: a reading a send too high
	// would throttle it again soon.
	learnMargin = 0.98

	// learnGrowth is how much a rate read grows on each accepted
	// response: 1% in a hundred. It lets a client whose quota grew, or
	// that shared it when the rate was read, find the rest, at about one
	// throttle in a hundred sends at most.
	learnGrowth = 1e-4

	// learnCatch is how much a rate read grows on each accepted response
	// up to the learner's ceil, which is at most learnCatchMax times what
	// was read: a reading counts whole sends, and a bucket drained at two
	// throttles a few seconds apart gives back a send more or less than it
	// refilled.
	learnCatch    = 1e-3
	learnCatchMax = 1.05

	// learnBelow is how far below the rate read over the time between
	// throttles a rate read from windows may be. That time is the
	// windows', give or take where in them the throttles came.
	learnBelow = 0.8
)

// throttled notes a throttle of a send made at sent, received at now with
// the fields h, whose Retry-After is retry, and returns what it read since
// the previous throttle: nothing at the first. fresh is false, and nothing
// is noted, for a send made before the previous throttle ended: the
// throttles of one burst are one.
func (l *learner) throttled(c *serverClock, h http.Header, sent time.Time, retry time.Duration, now time.Time) (rd reading, fresh bool) {
	if sent.Before(l.until) {
		return rd, false
	}
	st := c.readWall(h, now)
	dated := !st.date.IsZero() && retry%time.Second == 0 && !l.undated
	edge := st.date.Add(retry)
	if !l.at.IsZero() && now.After(l.at) {
		// Each reading is a send or so off; halving the weight of the
		// earlier ones keeps that from throttling the client again.
		l.okSum = l.okSum/2 + float64(l.ok)
		l.spanSum = l.spanSum/2 + now.Sub(l.at).Seconds()
		rd.rate = l.okSum / l.spanSum * learnMargin
		l.ceil = min(l.okSum+1, l.okSum*learnCatchMax) / l.spanSum * learnMargin
		if span := edge.Sub(l.edge); dated && l.tails != nil && span > 0 && span%time.Second == 0 {
			rd = l.windows(rd, edge.Unix(), min(int64(span/time.Second), learnSecs), int64(retry/time.Second))
		}
	}
	l.tails = nil
	if dated && l.secs != nil {
		l.tails = new([learnSecs + 1]int32)
		e := edge.Unix()
		for w := int64(1); w <= learnSecs; w++ {
			l.tails[w] = l.tails[w-1] + l.secs[(e-w)%histSecs]
		}
	}
	l.at, l.until, l.edge, l.ok, l.undated = now, now.Add(retry), edge, 0, false
	if l.secs != nil {
		*l.secs = [histSecs]int32{}
	}
	return rd, true
}

// windows reads rd again for a server that counts in fixed windows aligned
// on its clock. The throttle came in a window that ended at end (a Unix
// second), span seconds after the previous one's, with a Retry-After of
// retry seconds, and the previous throttle's window held the server's whole
// quota of the client's sends. The longest window of at least retry
// seconds, and at most the span, in which both held as many is the
// server's (a shorter one holds as many when the client sent the quota at
// once), and the sends the client made before it in the span (a window it
// did not spend right after the previous throttle) are not its rate.
//
// Two windows of a bucket can hold as many sends alike. A window whose rate
// is well below rd is not read, nor one as long as the span, of two seconds
// or more, that the throttle came in the last second of: a bucket drained
// at the same pace after each throttle holds as many in those. When one is
// read all the same, the window schedule that follows is throttled soon,
// and none is made after (see partition.throttled).
func (l *learner) windows(rd reading, end, span, retry int64) reading {
	var n int64
	for w := int64(1); w <= span; w++ {
		n += int64(l.secs[(end-w)%histSecs])
		r := float64(n) / float64(w)
		if w >= retry && n > 1 && n == int64(l.tails[w]) && (w < span || w == 1 || retry > 1) && r >= rd.rate*learnBelow {
			rd = reading{rate: r, quota: n, window: w, fixed: true}
		}
	}
	return rd
}

// accepted notes that a send made at sent, whose response had the Date
// date (zero when none), was accepted.
func (l *learner) accepted(sent, date time.Time) {
	if sent.Before(l.until) {
		return
	}
	l.ok++
	if date.IsZero() {
		l.undated = true
		return
	}
	if l.secs == nil {
		l.secs = new([histSecs]int32)
	}
	l.secs[date.Unix()%histSecs]++
}

// throttled runs the adaptive mode's step for a throttle of a send made at
// sent, received at now with the fields h and a Retry-After of retry, and
// reports whether the rate changed. The first throttle leaves the rate as
// it is, so that the time to the next reads the server's. After it, the rate
// is the one read when that is lower, or aimdCut of what it was when none
// was read (no send was accepted since the previous throttle). A throttle of
// a window schedule means the server does not count in fixed windows alone:
// the rate is then the one read, and there is no schedule after. A reading
// of fixed windows starts one. The caller holds p.mu.
func (p *partition) throttled(h http.Header, sent time.Time, retry time.Duration, now time.Time) bool {
	first := p.ad.learn.at.IsZero()
	rd, fresh := p.ad.learn.throttled(&p.clock, h, sent, retry, now)
	if !fresh || first {
		return false
	}
	scheduled := p.ad.sched.on()
	p.ad.sched = schedule{}
	switch {
	case rd.rate <= 0:
		p.rate *= aimdCut
		return true
	case scheduled:
		p.ad.learn.noSched = true
		p.rate = rd.rate
	default:
		p.rate = min(p.rate, rd.rate)
	}
	p.ad.learn.learned = true
	if rd.fixed && !p.ad.learn.noSched && p.clock.bounds.Load() != nil {
		p.ad.sched = schedule{quota: rd.quota, window: time.Duration(rd.window) * time.Second, start: p.ad.learn.edge, left: rd.quota}
	}
	return true
}
