package ratelimitgrpc

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// lateContext is an RPC context whose deadline has passed but whose timer
// has not fired yet: Err is still nil.
type lateContext struct{ context.Context }

func (lateContext) Deadline() (time.Time, bool) { return time.Now().Add(-time.Millisecond), true }

// TestOutcomeOfTheClientsDeadlineBeforeItsTimerFires: a handler that
// returns DeadlineExceeded once the client's deadline has passed, before
// the context's timer ended the context, was cut short by the client's
// deadline: 499, not the 504 of a server-side timeout. The clock decides,
// not only the context.
func TestOutcomeOfTheClientsDeadlineBeforeItsTimerFires(t *testing.T) {
	late := lateContext{context.Background()}
	ahead, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	for _, c := range []struct {
		name string
		ctx  context.Context
		err  error
		want int
	}{
		{"status DeadlineExceeded, the deadline passed", late, status.Error(codes.DeadlineExceeded, "x"), 499},
		{"context.DeadlineExceeded, the deadline passed", late, context.DeadlineExceeded, 499},
		{"status DeadlineExceeded, the deadline ahead", ahead, status.Error(codes.DeadlineExceeded, "x"), 504},
		{"Unavailable, the deadline passed", late, status.Error(codes.Unavailable, "x"), 503},
	} {
		if got := outcome(c.ctx, c.err, true); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}
