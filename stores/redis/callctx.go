package redisstore

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// callContext is the context of one plain call sent on the caller's
// goroutine: its parent's values, and the call's deadline, at which Done
// is closed. It lives in its pooled plainCall, so that bounding a call
// allocates nothing (context.WithDeadline allocates a context and a timer
// on every call). A parent cancelled without a deadline does not end it:
// a call that started waits for its reply or its deadline, at most the
// Store's budget.
type callContext struct {
	parent   context.Context
	deadline time.Time
	done     chan struct{}
	expired  atomic.Bool
	timer    *time.Timer // closes done at deadline; made on first use
}

var _ context.Context = (*callContext)(nil)

// Deadline implements context.Context.
func (c *callContext) Deadline() (time.Time, bool) { return c.deadline, true }

// Done implements context.Context.
func (c *callContext) Done() <-chan struct{} { return c.done }

// Err implements context.Context.
func (c *callContext) Err() error {
	if c.expired.Load() {
		return context.DeadlineExceeded
	}
	return nil
}

// Value implements context.Context: the parent's values while the call
// runs.
func (c *callContext) Value(key any) any {
	if c.parent == nil {
		return nil
	}
	return c.parent.Value(key)
}

func (c *callContext) expire() {
	c.expired.Store(true)
	close(c.done)
}

// arm starts c for a call of parent that ends at deadline.
func (c *callContext) arm(parent context.Context, deadline time.Time) {
	c.parent, c.deadline = parent, deadline
	if c.done == nil {
		c.done = make(chan struct{})
	}
	if c.timer == nil {
		c.timer = time.AfterFunc(time.Until(deadline), c.expire)
	} else {
		c.timer.Reset(time.Until(deadline))
	}
}

// disarm stops c's timer once its call returned. It reports false when
// the deadline had passed first: Done is then closed, and c may not serve
// another call.
func (c *callContext) disarm() bool {
	c.parent = nil
	return c.timer.Stop()
}

// directClient returns the client a plain call may run on from the
// caller's goroutine with its budget kept, or nil: a client that bounds
// its socket reads by ctx (go-redis's ContextTimeoutEnabled), with a
// callContext as the ctx. On any other client a call runs on a goroutine
// of its own (sendPlain), so that its caller returns at the budget while
// the read waits for the client's ReadTimeout. (go-redis's WithTimeout
// view of a Client, which would bound the read by the budget on the
// caller's goroutine, runs none of the Client's hooks: tracing and
// metrics would not see the Store's calls. docs/redis.md, "Why the
// default client pays a hand-off", weighs the other ways and measures
// what the hand-off costs.)
func directClient(c redis.UniversalClient, ctxReads bool) redis.Scripter {
	if ctxReads {
		return c
	}
	return nil
}
