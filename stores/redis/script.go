package redisstore

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/ratelimit"
)

//go:embed script.lua
var scriptSource string

// script is the one Lua script behind every call. Run sends EVALSHA and, on
// NOSCRIPT (a restarted or flushed server, a new Cluster node), EVAL, which
// also caches the script again.
var script = redis.NewScript(scriptSource)

// Script modes; see script.lua.
const (
	modeTake   = "t"
	modePeek   = "p" // take, and also reply with cost-0 peeks of the state before
	modeReturn = "r"
	// modeIndependent decides each request on its own, in order: the
	// coalesced checks of many callers.
	modeIndependent = "i"
)

// Reply widths per request.
const (
	takeWidth = 4
	peekWidth = 7
)

// fieldsPerRequest is the number of script arguments per request.
const fieldsPerRequest = 6

// maxSafe is the largest integer Lua's doubles hold exactly, 2^53-1.
const maxSafe = 1<<53 - 1

// instant is the time a call is made at: a client time in Unix
// microseconds, or unset to use the server's TIME.
type instant struct {
	us  int64
	set bool
}

func at(t time.Time) instant { return instant{us: t.UnixMicro(), set: true} }

// header appends the script's leading arguments.
func (s *Store) header(args []any, mode string, now instant) []any {
	if !now.set {
		return append(args, mode, "", 0)
	}
	return append(args, mode, now.us, ClockTTLSlack.Milliseconds())
}

// appendRequest appends the six script fields of a validated request.
func appendRequest(args []any, req *ratelimit.Request) ([]any, error) {
	return appendFields(args, req, int(req.Algorithm), req.Limit.Rate, req.Cost), nil
}

// appendOp appends the six script fields of an op in mode "i": a return
// has a negative cost, a lease is algorithm 4 with its size as the rate.
func appendOp(args []any, o *op) []any {
	switch o.kind {
	case opReturn:
		return appendFields(args, &o.req, int(o.req.Algorithm), o.req.Limit.Rate, -o.req.Cost)
	case opLease:
		return appendFields(args, &o.req, 4, o.n, o.req.Cost)
	}
	return appendFields(args, &o.req, int(o.req.Algorithm), o.req.Limit.Rate, o.req.Cost)
}

func appendFields(args []any, req *ratelimit.Request, alg, rate, cost int) []any {
	l := req.Limit
	var span int64
	if req.Algorithm == ratelimit.GCRA {
		span = gcraInterval(l)
	} else {
		span = ceilMicros(int64(l.Period))
	}
	var end any = ""
	if req.Window != (ratelimit.Window{}) {
		end = ceilMicros(req.Window.End) // within ±maxSafe: validated
	}
	return append(args, alg, rate, span, l.Capacity(), cost, end)
}

// gcraInterval is the refill interval of l in whole microseconds:
// ceil(ceil(Period/1µs)/Rate) = ceil(Period/(1000*Rate)), computed without
// overflow.
func gcraInterval(l ratelimit.Limit) int64 {
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

// wrapCtx wraps a ctx error as a Redis failure.
func wrapCtx(err error) error { return fmt.Errorf("ratelimit: redis: %w", err) }

// run executes the script and returns its integer reply.
func (s *Store) run(ctx context.Context, keys []string, args []any, want int) ([]int64, error) {
	vals, err := script.Run(ctx, s.client, keys, args...).Int64Slice()
	if err != nil {
		if err == redis.Nil {
			err = fmt.Errorf("empty reply")
		}
		return nil, fmt.Errorf("ratelimit: redis: %w", err)
	}
	if len(vals) != want {
		return nil, fmt.Errorf("ratelimit: redis: unexpected reply of %d values, want %d", len(vals), want)
	}
	return vals, nil
}

// runReturn executes the script in return mode.
func (s *Store) runReturn(ctx context.Context, keys []string, args []any) error {
	if err := script.Run(ctx, s.client, keys, args...).Err(); err != nil {
		return fmt.Errorf("ratelimit: redis: %w", err)
	}
	return nil
}

// result converts one request's reply (allowed, remaining, retry µs,
// reset µs) to a Result.
func result(l ratelimit.Limit, v []int64) ratelimit.Result {
	return ratelimit.Result{
		Allowed:    v[0] == 1,
		Limit:      l,
		Remaining:  int(v[1]),
		RetryAfter: time.Duration(v[2]) * time.Microsecond,
		ResetAfter: time.Duration(v[3]) * time.Microsecond,
	}
}
