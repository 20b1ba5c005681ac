package ratelimit_test

import (
	"fmt"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
)

// eventLog records what observers are told, without the request and the
// latency (which differ between two limiters by nature).
type eventLog []string

func (e *eventLog) observer() ratelimit.Option {
	return ratelimit.WithObserver(ratelimit.ObserverFunc(func(ev ratelimit.Event) {
		*e = append(*e, fmt.Sprintf("%s %v allowed=%v r=%d retry=%v reset=%v next=%v latency>0=%v",
			ev.Rule, ev.Outcome, ev.Result.Allowed, ev.Result.Remaining, ev.Result.RetryAfter,
			ev.Result.ResetAfter, ev.Result.NextAfter, ev.Latency > 0))
	}))
}

// TestDirectPathObservesAsTheGeneralPath: observers and a shadow rule are
// steps of the direct path, not reasons to leave it, and change nothing
// that a client or an observer sees: the same events (outcome, result,
// an observed latency), statuses, fields and bodies as on the general path.
func TestDirectPathObservesAsTheGeneralPath(t *testing.T) {
	for _, shadow := range []bool{false, true} {
		t.Run(fmt.Sprintf("shadow=%v", shadow), func(t *testing.T) {
			start := time.Unix(1_700_000_000, 0)
			fastClock, slowClock := ratelimittest.NewClock(start), ratelimittest.NewClock(start)
			var fastEvents, slowEvents eventLog
			rule := func(clock ratelimit.Clock, events *eventLog, opts ...ratelimit.Option) *ratelimit.Limiter {
				r := ratelimit.Rule{Name: "r", Limit: ratelimit.PerMinute(3), Key: ratelimit.ByIP(), Shadow: shadow}
				return ratelimit.NewRulesLimiter([]ratelimit.Rule{r}, append(opts, ratelimit.WithClock(clock), events.observer())...)
			}
			fast, slow := rule(fastClock, &fastEvents), rule(slowClock, &slowEvents, generalPath(slowClock))
			for i := range 12 {
				req := clientReq(i % 2)
				a, b := httptest.NewRecorder(), httptest.NewRecorder()
				fast.Handler(okHandler).ServeHTTP(a, req)
				slow.Handler(okHandler).ServeHTTP(b, req)
				if a.Code != b.Code || !reflect.DeepEqual(a.Header(), b.Header()) || a.Body.String() != b.Body.String() {
					t.Fatalf("request %d: direct %d %v %q, general %d %v %q", i, a.Code, a.Header(), a.Body, b.Code, b.Header(), b.Body)
				}
				va, vb := fast.Check(req), slow.Check(req)
				if va.Allowed() != vb.Allowed() || va.Result() != vb.Result() || va.Rule() != vb.Rule() {
					t.Fatalf("request %d: Check direct %v %+v, general %v %+v", i, va.Allowed(), va.Result(), vb.Allowed(), vb.Result())
				}
				fastClock.Advance(7 * time.Second)
				slowClock.Advance(7 * time.Second)
			}
			if !reflect.DeepEqual(fastEvents, slowEvents) || len(fastEvents) != 24 {
				t.Errorf("events differ:\ndirect  %q\ngeneral %q", fastEvents, slowEvents)
			}
		})
	}
}
