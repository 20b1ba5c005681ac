package ratelimit_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
)

// TestServeRouteErrorHandlerStopIsNotSampled: a request admitted under
// FailOpen that onError stops (fail closed) never ran: its adaptive slot
// must come back unsampled, as for a request another rule stopped. It was
// released as served with status 0 and an elapsed time of nearly nothing,
// a success under DefaultClassify: during a store outage with an error
// handler that fails closed, every request pulls the minimum RTT down to
// the cost of a failed store call.
func TestServeRouteErrorHandlerStopIsNotSampled(t *testing.T) {
	var seen []int
	l := ratelimit.NewRulesLimiter([]ratelimit.Rule{
		{Name: "inflight", Key: ratelimit.Global(), Adaptive: classifyRecorder(1, &seen)},
		{Name: "failing", Limit: ratelimit.PerMinute(10), Key: ratelimit.Global(), Store: failingStore},
	})
	errClosed := errors.New("fail closed")
	served, err := l.ServeRoute(ratelimittest.NewDiscardWriter(), ratelimittest.NewRequest("GET", "/", ""), "/", nil,
		func(error) error { return errClosed }, func(*http.Request) error {
			t.Fatal("next called for a request onError stopped")
			return nil
		})
	if served || err != errClosed {
		t.Fatalf("served %v, err %v; want onError's error", served, err)
	}
	if len(seen) != 0 {
		t.Fatalf("Classify saw statuses %v for a request that never ran; want it released unsampled", seen)
	}
	if st := l.Adaptive("inflight")[0]; st.InFlight != 0 {
		t.Fatalf("%d in flight after the request was stopped", st.InFlight)
	}
}
