package ratelimit_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/adaptive"
	"github.com/sluicehq/ratelimit/ratelimittest"
)

// TestAdaptiveMiddlewareAllocations: through Handler, a Limiter of
// adaptive rules allocates nothing, whether it rejects or admits the
// request, whatever the writer: its slots stay on the stack, and a writer
// that does not report its status is recorded by a recorder of its own,
// taken from a block of 64 allocated at once (which AllocsPerRun's
// whole-allocations-per-run rounds to 0).
func TestAdaptiveMiddlewareAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) })
	full := ratelimit.NewRulesLimiter([]ratelimit.Rule{{Name: "inflight", Key: ratelimit.Global(), Adaptive: fixedAdaptive(1)}})
	held, _ := full.Admit(ratelimittest.NewDiscardWriter(), ratelimittest.NewRequest("GET", "/", ""))
	defer held()
	open := ratelimit.NewRules([]ratelimit.Rule{{Name: "inflight", Key: ratelimit.Global(), Adaptive: fixedAdaptive(1 << 20)}})(next)
	req := ratelimittest.NewRequest("GET", "/", "")
	w := ratelimittest.NewDiscardWriter()
	plain := &plainWriter{h: http.Header{}}
	for _, c := range []struct {
		name string
		h    http.Handler
		w    http.ResponseWriter
		max  float64
	}{
		{"rejected", full.Handler(next), w, 0},
		{"admitted", open, w, 0},
		{"admitted, writer without Status", open, plain, 0},
	} {
		allocs := testing.AllocsPerRun(200, func() {
			w.Reset()
			clear(plain.h)
			c.h.ServeHTTP(c.w, req)
		})
		if allocs > c.max {
			t.Errorf("%s: %v allocations, want at most %v", c.name, allocs, c.max)
		}
	}
}

// TestAdaptiveLimitFollowsTheRule: AdaptiveLimit is the rule's limit as it
// moves (Initial before any request, lower after windows of drops), summed
// over a keyed rule's keys, 0 for a rule the limiter does not have, and
// reading it allocates nothing (a fair.Scheduler calls it on every
// request).
func TestAdaptiveLimitFollowsTheRule(t *testing.T) {
	clock := ratelimittest.NewClock(time.Time{})
	lim := ratelimit.NewRulesLimiter([]ratelimit.Rule{
		{Name: "inflight", Key: ratelimit.Global(), Adaptive: &adaptive.Config{Initial: 40, MinSamples: 5}},
		{Name: "per-route", Key: ratelimit.ByHeader("X-Route"), Adaptive: &adaptive.Config{Initial: 7}},
	}, ratelimit.WithClock(clock))
	if got := lim.AdaptiveLimit("inflight"); got != 40 {
		t.Errorf("before any request: %d, want Initial, 40", got)
	}
	h := lim.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }))
	for range 3 { // windows of upstream 503s: drops
		for i := range 10 {
			ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/api", "", "X-Route", fmt.Sprint(i%2)))
		}
		clock.Advance(200 * time.Millisecond)
	}
	got, want := lim.AdaptiveLimit("inflight"), lim.Adaptive("inflight")[0].Limit
	if got != want || got >= 40 {
		t.Errorf("after windows of drops: %d, want the rule's limit %d, below 40", got, want)
	}
	sum := 0
	for _, st := range lim.Adaptive("per-route") {
		sum += st.Limit
	}
	if got := lim.AdaptiveLimit("per-route"); got != sum || len(lim.Adaptive("per-route")) != 2 {
		t.Errorf("a keyed rule: %d, want the sum of its two keys' limits, %d", got, sum)
	}
	if got := lim.AdaptiveLimit("nope"); got != 0 {
		t.Errorf("a rule the limiter does not have: %d, want 0", got)
	}
	if allocs := testing.AllocsPerRun(100, func() { lim.AdaptiveLimit("inflight") }); allocs != 0 {
		t.Errorf("%v allocations per call, want 0", allocs)
	}
}

// TestAdaptiveRejectionAddsToAnOuterLimitersFields: a rejection through
// the middleware adds its RateLimit-Policy and RateLimit members to those
// an outer limiter already set, and answers as Check and Write do.
func TestAdaptiveRejectionAddsToAnOuterLimitersFields(t *testing.T) {
	inner := ratelimit.NewRulesLimiter([]ratelimit.Rule{{Name: "inflight", Key: ratelimit.Global(), Adaptive: fixedAdaptive(1)}})
	g := newGate(200)
	h := ratelimit.New(ratelimit.PerMinute(100), ratelimit.Global(), ratelimit.WithName("outer"))(inner.Handler(g))
	get := func() *http.Request { return ratelimittest.NewRequest("GET", "/api", "") }
	wait := hold(t, h, g, 1, get)
	res := ratelimittest.Do(h, get())
	direct := ratelimittest.NewDiscardWriter()
	v := inner.Check(get())
	v.Write(direct)
	close(g.release)
	wait()
	if res.Code != http.StatusServiceUnavailable {
		t.Fatalf("status %d, want 503", res.Code)
	}
	policies := res.Header.Values("RateLimit-Policy")
	if len(policies) != 2 || !strings.HasPrefix(policies[0], `"outer";`) || policies[1] != `"inflight";q=1;qu="concurrent-requests"` {
		t.Errorf("RateLimit-Policy %q, want the outer limiter's, then the adaptive rule's", policies)
	}
	if got := res.Header.Values("RateLimit"); len(got) != 2 || got[1] != `"inflight";r=0` {
		t.Errorf("RateLimit %q, want the outer limiter's, then the adaptive rule's", got)
	}
	for _, k := range []string{"Retry-After", "Cache-Control", "Content-Type"} {
		if got, want := res.Header.Get(k), direct.Header().Get(k); got != want {
			t.Errorf("%s: %q through the middleware, %q through Check and Write", k, got, want)
		}
	}
}

// TestAdaptiveSlotsFreedWhenTheRequestPathPanics: a panic after a slot was
// taken and before the handler ran (an observer of the admission, the
// KeyFunc of a second adaptive rule) gives the slots back: otherwise each
// such request would hold one for good (net/http recovers the panic), and
// after the limit's worth every request would be rejected.
func TestAdaptiveSlotsFreedWhenTheRequestPathPanics(t *testing.T) {
	boom := func(r *http.Request) bool { return r.Header.Get("X-Boom") != "" }
	panicky := ratelimit.KeyFunc(func(r *http.Request) (string, error) {
		if boom(r) {
			panic("key func bug")
		}
		return "k", nil
	})
	observer := ratelimit.ObserverFunc(func(e ratelimit.Event) {
		if e.Request != nil && boom(e.Request) && e.Result.Allowed {
			panic("observer bug")
		}
	})
	for _, c := range []struct {
		name string
		lim  *ratelimit.Limiter
	}{
		{"an observer", ratelimit.NewRulesLimiter([]ratelimit.Rule{{Name: "inflight", Key: ratelimit.Global(), Adaptive: fixedAdaptive(1)}},
			ratelimit.WithObserver(observer))},
		{"a second rule's KeyFunc", ratelimit.NewRulesLimiter([]ratelimit.Rule{
			{Name: "inflight", Key: ratelimit.Global(), Adaptive: fixedAdaptive(1)},
			{Name: "per-key", Key: panicky, Adaptive: fixedAdaptive(1)},
		})},
	} {
		h := c.lim.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		for i := range 3 {
			func() {
				defer func() {
					if recover() == nil {
						t.Fatalf("%s: request %d did not panic: rejected, %d in flight", c.name, i, c.lim.Adaptive("inflight")[0].InFlight)
					}
				}()
				ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", "", "X-Boom", "1"))
			}()
		}
		if st := c.lim.Adaptive("inflight")[0]; st.InFlight != 0 {
			t.Errorf("%s: %d in flight after three panicking requests, want 0", c.name, st.InFlight)
		}
		if code := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", "")).Code; code != http.StatusOK {
			t.Errorf("%s: a request after the panics: status %d, want 200", c.name, code)
		}
	}
}

// TestAdaptiveLeakedWriterNeverWritesToAnotherResponse: a handler that
// keeps its ResponseWriter past its return (here, handing it to a
// goroutine) breaks net/http's contract, and its late writes may go
// nowhere; but they never reach the response of a request served after it
// by the same limiter, whose recorder must not be the leaked one.
func TestAdaptiveLeakedWriterNeverWritesToAnotherResponse(t *testing.T) {
	leaked := make(chan http.ResponseWriter, 1)
	late := make(chan struct{})
	wrote := make(chan struct{})
	h := ratelimit.NewRules([]ratelimit.Rule{{Name: "inflight", Key: ratelimit.Global(), Adaptive: fixedAdaptive(8)}})(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/leak" {
				leaked <- w
				return
			}
			close(late) // the leaker writes while this request is being served
			<-wrote
			w.WriteHeader(http.StatusOK)
			w.Write([]byte("mine"))
		}))
	go func() {
		w := <-leaked
		<-late
		w.Header().Set("X-Leaked", "yes")
		w.WriteHeader(http.StatusTeapot)
		w.Write([]byte("leaked"))
		close(wrote)
	}()
	first := &plainWriter{h: http.Header{}} // no Status method: the limiter records the status itself
	h.ServeHTTP(first, ratelimittest.NewRequest("GET", "/leak", ""))
	second := &recordingWriter{plainWriter: plainWriter{h: http.Header{}}}
	h.ServeHTTP(second, ratelimittest.NewRequest("GET", "/", ""))
	if second.code != http.StatusOK || second.body.String() != "mine" || second.h.Get("X-Leaked") != "" {
		t.Errorf("the second response: status %d, body %q, X-Leaked %q; want 200, \"mine\" and no field from the leaked writer",
			second.code, second.body.String(), second.h.Get("X-Leaked"))
	}
}

// recordingWriter is a plainWriter that keeps the body and the first status.
type recordingWriter struct {
	plainWriter
	body strings.Builder
}

func (w *recordingWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}

func (w *recordingWriter) Write(b []byte) (int, error) { return w.body.Write(b) }

// TestAdaptiveStepAddsNothingToTheDirectPath: an adaptive rule is a step
// in front of the other rules' request path, not a path of its own: a
// limiter of rules on their direct path (one rule, or several stacked)
// with an adaptive rule added allocates no more per request than without
// it, and the adaptive rule's Critical is asked once per request.
func TestAdaptiveStepAddsNothingToTheDirectPath(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) })
	perMinute := func(name string) ratelimit.Rule {
		return ratelimit.Rule{Name: name, Key: ratelimit.Global(), Limit: ratelimit.PerMinute(1 << 30)}
	}
	for _, c := range []struct {
		name  string
		rules []ratelimit.Rule
	}{
		{"one rule", []ratelimit.Rule{perMinute("a")}},
		{"stacked rules", []ratelimit.Rule{perMinute("a"), perMinute("b")}},
	} {
		asked := 0
		cfg := fixedAdaptive(1 << 20)
		cfg.Critical = func(*http.Request) bool { asked++; return true }
		with := ratelimit.NewRules(append(slices.Clone(c.rules), ratelimit.Rule{Name: "inflight", Key: ratelimit.Global(), Adaptive: cfg}))(next)
		without := ratelimit.NewRules(c.rules)(next)
		req := ratelimittest.NewRequest("GET", "/", "")
		w := ratelimittest.NewDiscardWriter()
		allocs := func(h http.Handler) float64 {
			return testing.AllocsPerRun(100, func() {
				w.Reset()
				h.ServeHTTP(w, req)
				if w.Status() != 200 {
					t.Fatalf("%s: status %d", c.name, w.Status())
				}
			})
		}
		base := allocs(without)
		asked = 0
		if got := allocs(with); got > base {
			t.Errorf("%s: %v allocations with an adaptive rule, %v without", c.name, got, base)
		}
		if asked != 101 { // AllocsPerRun runs the function once more to warm up
			t.Errorf("%s: Critical asked %d times for 101 requests", c.name, asked)
		}
	}
}

// TestAdaptiveRecordsTheStatusOfTimedRequestsOnly: at high rates an
// adaptive rule times one request in up to 64, and only those outcomes
// are recorded; the others reach the handler with the caller's own
// writer, not a recorder. In virtual time (testing/synctest), so that the
// whole run is one sample window, which thins its sampling as it fills.
func TestAdaptiveRecordsTheStatusOfTimedRequestsOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := &plainWriter{h: http.Header{}} // no Status method: recorded only when timed
		own := 0
		h := ratelimit.NewRules([]ratelimit.Rule{{Name: "inflight", Key: ratelimit.Global(), Adaptive: fixedAdaptive(1 << 20)}})(
			http.HandlerFunc(func(got http.ResponseWriter, r *http.Request) {
				if got == http.ResponseWriter(w) {
					own++
				}
				got.WriteHeader(http.StatusOK)
			}))
		req := ratelimittest.NewRequest("GET", "/", "")
		const n = 8000
		for range n {
			h.ServeHTTP(w, req)
		}
		if own == 0 || own == n {
			t.Errorf("%d of %d requests given the caller's writer; want those sampled out (most, once sampling thinned), not none or all", own, n)
		}
	})
}
