package ratelimitclient

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrWouldWait is matched by the error RoundTrip returns, before any network
// call, when a request would have to wait for the rate limit longer than the
// Transport's MaxWait or than its context's deadline allows, or would be
// queued more than a policy window beyond the quota the server announced.
//
// The error is a *WaitError: errors.Is(err, ErrWouldWait) is true for every
// such error, and errors.Is(err, context.DeadlineExceeded) is true as well
// when the context's deadline, not MaxWait, was the bound. Both hold through
// the *url.Error an http.Client wraps it in.
var ErrWouldWait = errors.New("ratelimit: request would wait too long for the rate limit")

// WaitError is the error of a request that was not sent because its wait
// for the rate limit did not fit. See ErrWouldWait.
type WaitError struct {
	Partition string        // the partition, as in Event.Partition
	Wait      time.Duration // how long the request would have waited
	Bound     time.Duration // the longest wait allowed: MaxWait or the time to the deadline
	Deadline  bool          // the context's deadline set Bound

	// queued: the wait fitted Bound, but the send would have been queued
	// further ahead than a policy lets sends queue (a window past the
	// reset of the quota the server announced, or the adaptive mode's
	// limit), which neither MaxWait nor the deadline set.
	queued bool
}

func (e *WaitError) Error() string {
	if e.queued {
		return fmt.Sprintf("ratelimit: %s: request would be queued %v for the rate limit, further ahead than the server's announced quota lets requests queue",
			e.Partition, e.Wait.Round(time.Millisecond))
	}
	by := "MaxWait"
	if e.Deadline {
		by = "the context deadline"
	}
	return fmt.Sprintf("ratelimit: %s: request would wait %v for the rate limit, beyond %v allowed by %s",
		e.Partition, e.Wait.Round(time.Millisecond), e.Bound.Round(time.Millisecond), by)
}

// Is reports whether target is ErrWouldWait, or context.DeadlineExceeded
// when the deadline was the bound.
func (e *WaitError) Is(target error) bool {
	return target == ErrWouldWait || e.Deadline && target == context.DeadlineExceeded
}

// Timeout reports whether the deadline was the bound, as net.Error does.
func (e *WaitError) Timeout() bool { return e.Deadline }
