package redisstore

import (
	"context"
	"time"
)

// plainBatch reports whether every op of a coalesced batch is a plain take
// (see plain), which plainScript decides in one call.
func (s *Store) plainBatch(ops []*op) bool {
	for _, o := range ops {
		if o.kind != opTake || !s.plain(&o.req) {
			return false
		}
	}
	return true
}

// sendPlainBatch sends ops, plain takes of one time, as one plainScript
// call, and stores each op's reply or error. The ops the script left to
// script (a state that needs its exact arithmetic; nothing was written for
// them) go to script in one more call.
func (s *Store) sendPlainBatch(ctx context.Context, ops []*op) {
	c := &plainCall{s: s, done: make(chan struct{}, 1)}
	c.runFn = c.run
	c.keyv = make([]string, len(ops))
	c.argv = make([]any, 4, 4+3*len(ops))
	c.argv[0], c.argv[1], c.argv[2], c.argv[3] = &c.tok, "", 0, s.absentHint()
	if now := ops[0].now; now.set {
		c.argv[1], c.argv[2] = now.us, ClockTTLSlack.Milliseconds()
	}
	if s.retries {
		c.tok.id, c.tok.n = s.callID, s.calls.Add(1)
	}
	for i, o := range ops {
		c.keyv[i] = o.key
		c.argv = append(c.argv, gcraInterval(o.req.Limit), int64(o.req.Limit.Capacity()), int64(o.req.Cost))
	}
	s.stats.roundTrips.Add(1)
	s.stats.sent.Add(int64(len(ops)))
	var got []any
	_, err := s.sendPlain(ctx, time.Time{}, c)
	if err == nil {
		got, err = plainValues(c.ctx, c.cmd, len(ops))
	}
	var rest []*op
	for i, o := range ops {
		if err != nil {
			o.err = err
			continue
		}
		vals, ok, err := s.plainTake(got[takeWidth*i:], &o.req)
		if !ok {
			rest = append(rest, o)
			continue
		}
		o.vals, o.err = vals, err
	}
	if len(rest) > 0 {
		s.sendScript(ctx, rest)
	}
}
