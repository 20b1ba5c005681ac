package redisstore

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/ratelimit/stores"
)

//go:embed script.lua
var scriptSource string

// clockSource is the prelude of the Store's scripts that sets now, the
// time of a call: the caller's (ARGV[2]) or the server's TIME.
//
//go:embed clock.lua
var clockSource string

// script is the one Lua script behind every call. Run sends EVALSHA and, on
// NOSCRIPT (a restarted or flushed server, a new Cluster node), EVAL, which
// also caches the script again.
var script = redis.NewScript(clockSource + logSource + scriptSource)

// Script modes; see script.lua.
const (
	modeTake   = "t"
	modePeek   = "p" // take, and also reply with cost-0 peeks of the state before
	modeReturn = "r"
	// modeIndependent decides each request on its own, in order: the
	// coalesced checks of many callers.
	modeIndependent = "i"
)

// Reply widths per request: allowed, remaining, retry µs, reset µs and
// the token; a peek adds its remaining, retry and reset.
const (
	takeWidth = 5
	peekWidth = takeWidth + 3
)

// fieldsPerRequest is the number of script arguments per request.
const fieldsPerRequest = 7

// maxDelayMicros bounds the MaxDelay sent to the script (about 35 years), so
// that a reservation's time stays within the script's exact range.
const maxDelayMicros = 1 << 50

// maxSafe is the largest integer Lua's doubles hold exactly, 2^53-1.
const maxSafe = 1<<53 - 1

// instant is the time a call is made at: a client time in Unix
// microseconds, or unset to use the server's TIME.
type instant struct {
	us  int64
	set bool
}

func at(t time.Time) instant { return instant{us: t.UnixMicro(), set: true} }

// headerLen is the number of the script's leading arguments.
const headerLen = 4

// header appends the script's leading arguments. The fourth, how long the
// call key keeps the reply, is set by run.
func (s *Store) header(args []any, mode string, now instant) []any {
	if !now.set {
		return append(args, mode, "", 0, 0)
	}
	return append(args, mode, now.us, ClockTTLSlack.Milliseconds(), 0)
}

// appendRequest appends the script fields of a validated request.
func appendRequest(args []any, req *stores.Request) ([]any, error) {
	return appendFields(args, req, wireAlg(req.Algorithm), req.Limit.Rate, req.Cost), nil
}

// appendOp appends the script fields of an op in mode "i": a return
// has a negative cost, a lease is algorithm 4 with its size as the rate.
func appendOp(args []any, o *op) []any {
	switch o.kind {
	case opReturn:
		return appendFields(args, &o.req, wireAlg(o.req.Algorithm), o.req.Limit.Rate, -o.req.Cost)
	case opLease:
		return appendFields(args, &o.req, 4, o.n, o.req.Cost)
	}
	return appendFields(args, &o.req, wireAlg(o.req.Algorithm), o.req.Limit.Rate, o.req.Cost)
}

func appendFields(args []any, req *stores.Request, alg, rate, cost int) []any {
	l := req.Limit
	var span int64
	if req.Algorithm == stores.GCRA {
		span = gcraInterval(l)
	} else {
		span = ceilMicros(int64(l.Period))
	}
	return append(args, alg, rate, span, l.Capacity(), cost, sixth(req), seventh(req))
}

// seventh returns the seventh script field of a request: "" for most, or
// "[!]<n>" where "!" marks Force and n is, for GCRA, MaxDelay in whole
// microseconds (pacing), and for the windows the Slot a forced take or a
// return applies to.
func seventh(req *stores.Request) string {
	var n int64
	switch req.Algorithm {
	case stores.GCRA:
		n = min(int64(req.MaxDelay/time.Microsecond), maxDelayMicros)
	case stores.SlidingWindow, stores.FixedWindow:
		n = int64(req.Slot)
	}
	switch {
	case req.Force && n == 0:
		return "!"
	case req.Force:
		return "!" + strconv.FormatInt(n, 10)
	case n == 0:
		return ""
	}
	return strconv.FormatInt(n, 10)
}

// sixth returns the sixth script field of a request: a fixed window's
// explicit bounds, or the token of a Concurrency or GCRA request (which
// only a return reads). A GCRA token beyond the script's exact range is no
// time the key ever held: it is sent as one that matches none.
func sixth(req *stores.Request) any {
	w := req.Window
	switch {
	case req.Algorithm == stores.Concurrency || req.Algorithm == stores.SlidingLog:
		return strconv.FormatUint(min(req.Slot, maxSafe), 10)
	case req.Algorithm == stores.GCRA && req.Slot == 0:
		return ""
	case req.Algorithm == stores.GCRA:
		return strconv.FormatUint(min(req.Slot, maxSafe), 10)
	case w == (stores.Window{}):
		return ""
	case w.PrevStart == 0 && w.NextEnd == 0:
		return ceilMicros(w.End) // within ±maxSafe: validated
	}
	var prev, next int64
	if w.PrevStart != 0 {
		prev = ceilMicros(w.PrevStart)
	}
	if w.NextEnd != 0 {
		next = ceilMicros(w.NextEnd)
	}
	return fmt.Sprintf("%d:%d:%d:%d", prev, ceilMicros(w.Start), ceilMicros(w.End), next)
}

// gcraInterval is the refill interval of l in whole microseconds:
// ceil(ceil(Period/1µs)/Rate) = ceil(Period/(1000*Rate)), computed without
// overflow.
func gcraInterval(l stores.Limit) int64 {
	d := int64(time.Microsecond) * int64(l.Rate)
	span := int64(l.Period) / d
	if int64(l.Period)%d != 0 {
		span++
	}
	return span
}

// ceilMicros converts nanoseconds to microseconds, rounding up.
func ceilMicros(ns int64) int64 {
	q := ns / 1000
	if ns%1000 > 0 {
		q++
	}
	return q
}

// run executes the script and returns its integer reply.
func (s *Store) run(ctx context.Context, keys []string, args []any, want int) ([]int64, error) {
	keys = s.callKey(ctx, keys, args)
	vals, err := s.evalRetry(ctx, keys, args).Int64Slice()
	if err != nil {
		return nil, replyError(ctx, err)
	}
	if len(vals) != want {
		return nil, replyLenError(len(vals), want)
	}
	return vals, nil
}

// replyError is callError for the error of a script's reply; a nil reply
// is one too.
func replyError(ctx context.Context, err error) error {
	if err == redis.Nil {
		err = fmt.Errorf("empty reply")
	}
	return callError(ctx, err)
}

// replyLenError is the error of a reply of n values where want were due.
func replyLenError(n, want int) error {
	return fmt.Errorf("ratelimit: redis: unexpected reply of %d values, want %d", n, want)
}

// runReturn executes the script in return mode.
func (s *Store) runReturn(ctx context.Context, keys []string, args []any) error {
	keys = s.callKey(ctx, keys, args)
	if err := s.evalRetry(ctx, keys, args).Err(); err != nil {
		return callError(ctx, err)
	}
	return nil
}

// callError wraps the error of a script call; when ctx ended first (a
// client that bounds reads by ctx reports an i/o timeout), it wraps ctx's
// error too, so that errors.Is(err, context.DeadlineExceeded) holds.
func callError(ctx context.Context, err error) error {
	cerr := ctx.Err()
	if d, ok := ctx.Deadline(); ok && cerr == nil && !time.Now().Before(d) {
		cerr = context.DeadlineExceeded // the read deadline fired before ctx's timer
	}
	if cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("ratelimit: redis: %w: %w", cerr, err)
	}
	return fmt.Errorf("ratelimit: redis: %w", err)
}

// eval runs the script. A caller never waits past ctx's deadline: see
// bounded. The call on the caller's goroutine is written out here, so that
// it allocates no closure.
func (s *Store) eval(ctx context.Context, keys []string, args []any) *redis.Cmd {
	if s.onCaller(ctx) {
		return script.Run(ctx, s.client, keys, args...)
	}
	var cmd *redis.Cmd
	if err := s.bounded(ctx, func() error { cmd = script.Run(ctx, s.client, keys, args...); return nil }); err != nil {
		// Not into cmd, which the call's goroutine may yet write.
		failed := redis.NewCmd(ctx)
		failed.SetErr(err)
		return failed
	}
	return cmd
}

// onCaller reports whether a call under ctx may run on its caller's
// goroutine with ctx's deadline kept: the client bounds its socket reads
// by ctx (go-redis's ContextTimeoutEnabled), or ctx has no end.
func (s *Store) onCaller(ctx context.Context) bool { return s.ctxReads || ctx.Done() == nil }

// bounded runs call, which sends commands on s.client under ctx, and
// returns its error, or ctx's once ctx ends first. A client that does not
// bound its socket reads by ctx (go-redis without ContextTimeoutEnabled
// waits for its ReadTimeout, 5s by default, and resends after it) runs
// call on a goroutine of its own, which ends when the client gives up: the
// caller returns at its deadline. What call writes is read, or written,
// by its caller only when bounded returned nil.
func (s *Store) bounded(ctx context.Context, call func() error) error {
	if s.onCaller(ctx) {
		return call()
	}
	done := make(chan error, 1)
	go func() { done <- call() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// callKeyMargin is how much longer than a call's deadline its call key
// keeps the reply, to cover the retries of a client whose clock runs apart
// from the server's.
const callKeyMargin = 100 * time.Millisecond

// callKey returns keys with the call key appended and sets the script's
// fourth argument, when the client may retry a command (go-redis does on a
// dropped connection, MaxRetries times): a retried call then replies the
// first one's reply instead of applying its requests twice. The key shares
// the hash tag of keys[0], and so its Cluster slot.
func (s *Store) callKey(ctx context.Context, keys []string, args []any) []string {
	if !s.retries {
		return keys
	}
	keep := maxCallKeep
	if d, ok := ctx.Deadline(); ok {
		keep = min(keep, time.Until(d)+callKeyMargin)
	}
	args[3] = max(1, keep.Milliseconds())
	id := s.calls.Add(1)
	k := s.prefix + "{" + hashTag(keys[0]) + "}:call:" + s.callID + strconv.FormatUint(id, 36)
	return append(keys[:len(keys):len(keys)], k)
}

// maxCallKeep bounds how long a call key lives, for calls without a deadline.
const maxCallKeep = 10 * time.Second

// result converts one request's reply (allowed, remaining, retry µs,
// reset µs, ...) to a Result, without its token.
func result(l stores.Limit, v []int64) stores.Result {
	return stores.Result{
		Allowed:    v[0] == 1,
		Limit:      l,
		Remaining:  int(v[1]),
		RetryAfter: time.Duration(v[2]) * time.Microsecond,
		ResetAfter: time.Duration(v[3]) * time.Microsecond,
	}
}

// takeResult converts the reply to a Take of req. An allowed GCRA take
// carries its Delay (a reservation's) where RetryAfter would be, an allowed
// sliding-window take its NextAfter. The
// fifth value is the Slot token of a take of non-zero cost that consumed:
// for GCRA the key's time after it, in µs; for a window its end, in µs;
// for Concurrency the first id of its slots.
func takeResult(req *stores.Request, v []int64) stores.Result {
	res := result(req.Limit, v)
	switch {
	case v[0] != 1 || req.Force:
	case req.Algorithm == stores.GCRA:
		res.RetryAfter, res.Delay = 0, res.RetryAfter
	case req.Algorithm == stores.SlidingWindow || req.Algorithm == stores.SlidingLog:
		res.RetryAfter, res.NextAfter = 0, res.RetryAfter
	}
	if req.Cost > 0 {
		res.Slot = uint64(v[4])
	}
	return res
}

// peekResult converts a cost-0 peek's remaining, retry and reset of
// req's state, which allowed reports.
func peekResult(req *stores.Request, allowed bool, v []int64) stores.Result {
	peek := *req
	peek.Cost, peek.Force = 0, false
	code := int64(0)
	if allowed {
		code = 1
	}
	return takeResult(&peek, []int64{code, v[0], v[1], v[2], 0})
}
