package redisstore

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/ratelimit/stores"
)

// plainSource is the script of a plain GCRA take; see plain.lua.
//
//go:embed plain.lua
var plainSource string

// plainScript is the small script behind the most common check: one GCRA
// take that reads its key once and writes it at most once. With the
// server's TIME that is three commands besides EVALSHA (TIME, GET, SET),
// and two for a key that holds no state on Redis 7 or later (TIME, and
// one SET NX GET that writes it only if it is still absent). Everything
// else, and the rare state it leaves to exact arithmetic, goes to script.
var plainScript = redis.NewScript(clockSource + plainSource)

// Replies of plainScript in place of allowed that are no decision, and
// the one that is allowed, on a key that held no state.
const (
	plainResentUnknown = -2 // a resent call found its key written by another since
	plainNeedsScript   = -3 // the state needs script.lua's exact arithmetic
	plainAllowedAbsent = 2  // allowed; the key held no state
)

// absentHint is plainScript's fourth argument: "1" (try SET NX GET, which
// reads and writes a key that holds no state in one command) unless the
// Store's last plain take found its key holding state, "" (GET first: on a
// key that holds state the SET NX GET writes nothing and costs the server
// more than a GET). See noteAbsent.
func (s *Store) absentHint() any {
	if s.keysHeld.Load() {
		return hintGet
	}
	return hintTry
}

// The values of absentHint, boxed once: converting a string to an
// interface on every call would allocate.
var hintTry, hintGet any = "1", ""

// noteAbsent records whether a plain take, by its reply code, found its
// key without state: allowed on an absent key, or any other decision. The
// flag is written only when it changes, so that concurrent takes on one
// kind of key share its cache line without writing it.
func (s *Store) noteAbsent(code int64) {
	if code < 0 {
		return // no decision
	}
	if held := code != plainAllowedAbsent; s.keysHeld.Load() != held {
		s.keysHeld.Store(held)
	}
}

// errResentUnknown is the error of a take whose reply was lost and whose
// resend found its key written by another call since: whether the first
// send applied cannot be known, and applying it again could count it
// twice, so the take fails (and the caller's failure policy answers).
var errResentUnknown = errors.New("ratelimit: redis: a take resent after its reply was lost found its key changed by another call: its outcome is unknown, and it was not applied again")

// plain reports whether a take of req goes to plainScript: GCRA, cost 1 or
// more, not forced (a settlement) and not paced (a reservation), on a
// client that never redirects a command (plainClient).
func (s *Store) plain(req *stores.Request) bool {
	return s.plainOK && req.Algorithm == stores.GCRA && req.Cost >= 1 && !req.Force && req.MaxDelay < time.Microsecond
}

// plainClient reports whether plainScript may serve c: a go-redis Client or
// Ring, which resend a command only after a network error or a retryable
// error reply. A Cluster client (or an unknown one, which may wrap one)
// also resends the commands a redirection refused, on another node: the
// call keys of script tell those apart.
func plainClient(c redis.UniversalClient) bool {
	switch c.(type) {
	case *redis.Client, *redis.Ring:
		return true
	}
	return false
}

// plainCall is one plainScript call: its arguments (which point into it),
// its reply, and what the caller waits on. Calls are pooled, unless the
// caller stopped waiting before the reply (the call is then the client's
// goroutine's until it ends, and is left to the collector).
type plainCall struct {
	ctx   context.Context
	rc    redis.Scripter // the client it is sent on
	cctx  callContext    // ctx when sent on the caller's goroutine
	s     *Store
	tok   callToken
	now   int64
	slack int64
	t     int64
	cap   int64
	cost  int64
	args  [7]any    // a solo take's arguments, argv's array
	keys  [1]string // a solo take's key, keyv's array
	argv  []any
	keyv  []string
	cmd   *redis.Cmd
	done  chan struct{}
	timer *time.Timer
	runFn func() // c.run, bound once
}

var plainPool = sync.Pool{New: func() any {
	c := &plainCall{done: make(chan struct{}, 1)}
	c.runFn = c.run
	c.args = [7]any{&c.tok, "", &c.slack, "", &c.t, &c.cap, &c.cost}
	c.argv, c.keyv = c.args[:], c.keys[:]
	return c
}}

// callToken is the first argument of plainScript: the call's id, which the
// script stores with the state it writes. go-redis marshals the arguments
// each time it writes the command, so the token knows when the client
// resends the call after a lost reply, and says so ("!" before the id): a
// resend that finds its own id in the key replies without applying again.
type callToken struct {
	id    string // "": the client never resends, no id
	n     uint64
	sends int
	buf   [48]byte
}

// MarshalBinary implements encoding.BinaryMarshaler for go-redis.
func (c *callToken) MarshalBinary() ([]byte, error) {
	if c.id == "" {
		return nil, nil
	}
	c.sends++
	b := c.buf[:0]
	if c.sends > 1 {
		b = append(b, '!')
	}
	b = append(b, c.id...)
	return strconv.AppendUint(b, c.n, 36), nil
}

// run sends the call: EVALSHA, and on NOSCRIPT (a restarted or flushed
// server) EVAL, as a first send unless EVALSHA itself had been resent.
func (c *plainCall) run() {
	c.cmd = plainScript.EvalSha(c.ctx, c.rc, c.keyv, c.argv...)
	if err := c.cmd.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		if c.tok.sends == 1 {
			c.tok.sends = 0
		}
		c.cmd = plainScript.Eval(c.ctx, c.rc, c.keyv, c.argv...)
	}
	c.done <- struct{}{}
}

// soloPlain sends a plain take of req on its own, without a budget
// context or an op: always without coalescing, and with coalescing when its
// lane would send it alone anyway (see do). sent is false when it was not
// sent, or when plainScript left it to script: the caller goes on as usual.
func (s *Store) soloPlain(ctx context.Context, now instant, key string, req *stores.Request) (vals [takeWidth]int64, sent bool, err error) {
	if !s.coalesce {
		s.stats.roundTrips.Add(1)
		s.stats.sent.Add(1)
		return s.takePlain(ctx, s.plainDeadline(ctx), now, key, req)
	}
	if ctx.Err() != nil {
		return vals, false, nil // do reports it
	}
	l := s.laneFor(key)
	if l.inflight >= s.maxInFlight || l.batches != 0 || len(l.queue) != 0 || s.maxWait != 0 {
		l.mu.Unlock()
		return vals, false, nil
	}
	l.inflight++
	l.mu.Unlock()
	vals, sent, err = s.takePlain(ctx, s.plainDeadline(ctx), now, key, req)
	s.handOff(l)
	if sent {
		s.stats.roundTrips.Add(1)
		s.stats.sent.Add(1)
	}
	return vals, sent, err
}

// plainDeadline is the end of a plain take's budget (see WithTimeout), or
// zero when ctx's own deadline comes first.
func (s *Store) plainDeadline(ctx context.Context) time.Time {
	d := time.Now().Add(s.timeout)
	if cd, ok := ctx.Deadline(); ok && !cd.After(d) {
		return time.Time{}
	}
	return d
}

// takePlain runs a plain take of req on key within ctx and the budget
// ending at deadline (zero: ctx's own). ok is false when the script left
// the take to script (nothing was applied).
func (s *Store) takePlain(ctx context.Context, deadline time.Time, now instant, key string, req *stores.Request) (vals [takeWidth]int64, ok bool, err error) {
	c := plainPool.Get().(*plainCall)
	c.s, c.t, c.cap, c.cost = s, gcraInterval(req.Limit), int64(req.Limit.Capacity()), int64(req.Cost)
	c.keys[0] = key
	c.args[1], c.now, c.slack = "", 0, 0
	c.args[3] = s.absentHint()
	if now.set {
		c.now, c.slack = now.us, ClockTTLSlack.Milliseconds()
		c.args[1] = &c.now
	}
	c.tok.id, c.tok.sends = "", 0
	if s.retries {
		c.tok.id, c.tok.n = s.callID, s.calls.Add(1)
	}
	reuse, err := s.sendPlain(ctx, deadline, c)
	if err != nil {
		return vals, true, err // c may still be in use
	}
	vals, ok, err = s.plainReply(c.ctx, c.cmd, req)
	if reuse {
		*c = plainCall{done: c.done, timer: c.timer, runFn: c.runFn, args: c.args, argv: c.argv, keyv: c.keyv, cctx: callContext{done: c.cctx.done, timer: c.cctx.timer}}
		plainPool.Put(c)
	}
	return vals, ok, err
}

// sendPlain runs c and waits for its reply, at most until the deadline
// passes (zero: ctx's own). On the Store's direct client (see
// directClient) the call runs on the caller's goroutine, with c's
// callContext as its ctx; otherwise it runs on a goroutine of its own, as
// eval's, and the caller also returns when ctx ends. reuse is false when c
// may not be pooled again.
func (s *Store) sendPlain(ctx context.Context, deadline time.Time, c *plainCall) (reuse bool, err error) {
	if s.direct != nil {
		if err := ctx.Err(); err != nil {
			return false, callError(ctx, err)
		}
		if deadline.IsZero() {
			var ok bool
			if deadline, ok = ctx.Deadline(); !ok {
				deadline = time.Now().Add(s.timeout)
			}
		}
		c.rc = s.direct
		c.cctx.arm(ctx, deadline)
		c.ctx = &c.cctx
		c.run()
		<-c.done
		return c.cctx.disarm(), nil
	}
	c.rc, c.ctx = s.client, ctx
	if ctx.Done() == nil && deadline.IsZero() {
		c.run()
		<-c.done
		return true, nil
	}
	var expired <-chan time.Time
	if !deadline.IsZero() {
		if c.timer == nil {
			c.timer = time.NewTimer(time.Until(deadline))
		} else {
			c.timer.Reset(time.Until(deadline))
		}
		expired = c.timer.C
	}
	go c.runFn()
	select {
	case <-c.done:
		if c.timer != nil {
			c.timer.Stop()
		}
		return true, nil
	case <-ctx.Done():
		return false, callError(ctx, ctx.Err())
	case <-expired:
		return false, fmt.Errorf("ratelimit: redis: %w", context.DeadlineExceeded)
	}
}

// plainReply converts plainScript's reply to a solo take.
func (s *Store) plainReply(ctx context.Context, cmd *redis.Cmd, req *stores.Request) (vals [takeWidth]int64, ok bool, err error) {
	got, err := plainValues(ctx, cmd, 1)
	if err != nil {
		return vals, true, err
	}
	return s.plainTake(got, req)
}

// plainValues returns the reply of a plainScript call of n takes.
func plainValues(ctx context.Context, cmd *redis.Cmd, n int) ([]any, error) {
	v, err := cmd.Result()
	if err != nil {
		return nil, replyError(ctx, err)
	}
	got, _ := v.([]any) // not Int64Slice, which would allocate a slice
	if len(got) != takeWidth*n {
		return nil, replyLenError(len(got), takeWidth*n)
	}
	return got, nil
}

// plainTake converts the takeWidth values of one take's reply, and notes
// whether its key held state (noteAbsent).
func (s *Store) plainTake(got []any, req *stores.Request) (vals [takeWidth]int64, ok bool, err error) {
	for i, x := range got[:takeWidth] {
		n, isInt := x.(int64)
		if !isInt {
			return vals, true, fmt.Errorf("ratelimit: redis: unexpected reply value %T", x)
		}
		vals[i] = n
	}
	s.noteAbsent(vals[0])
	switch vals[0] {
	case plainAllowedAbsent:
		vals[0] = 1
	case -1:
		return vals, true, wrongType(req)
	case plainResentUnknown:
		return vals, true, errResentUnknown
	case plainNeedsScript:
		return vals, false, nil
	}
	return vals, true, nil
}
