package ratelimit_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/adaptive"
	"github.com/sluicehq/ratelimit/ratelimittest"
)

// gate is a handler that holds each request until released, and reports
// each arrival.
type gate struct {
	arrived chan struct{}
	release chan struct{}
	status  int
}

func newGate(status int) *gate {
	return &gate{arrived: make(chan struct{}, 100), release: make(chan struct{}), status: status}
}

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.arrived <- struct{}{}
	<-g.release
	w.WriteHeader(g.status)
}

// hold sends n requests through h in the background and waits until they
// are all inside the handler; wait returns once they have been answered.
func hold(t *testing.T, h http.Handler, g *gate, n int, newReq func() *http.Request) (wait func()) {
	t.Helper()
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ratelimittest.Do(h, newReq())
		}()
		<-g.arrived
	}
	return wg.Wait
}

// overTheLimit holds n requests inside lim's handler, sends one more and
// returns its answer, then lets the n finish.
func overTheLimit(t *testing.T, lim *ratelimit.Limiter, n int) *ratelimittest.Response {
	t.Helper()
	g := newGate(200)
	h := lim.Handler(g)
	get := func() *http.Request { return ratelimittest.NewRequest("GET", "/api", "") }
	wait := hold(t, h, g, n, get)
	res := ratelimittest.Do(h, get())
	close(g.release)
	wait()
	return res
}

func fixedAdaptive(n int) *adaptive.Config {
	return &adaptive.Config{Min: n, Max: n, Initial: n}
}

// TestAdaptiveRejectionIs503 : over the limit, the answer is 503 with
// Retry-After, the reduced-capacity problem type and a RateLimit-Policy in
// the concurrent-requests unit; never 429.
func TestAdaptiveRejectionIs503(t *testing.T) {
	lim := ratelimit.NewRulesLimiter([]ratelimit.Rule{{Name: "inflight", Key: ratelimit.Global(), Adaptive: fixedAdaptive(2)}})
	res := overTheLimit(t, lim, 2)
	if res.Code != http.StatusServiceUnavailable {
		t.Fatalf("status %d, want 503", res.Code)
	}
	if got := res.Header.Get("Retry-After"); got != "1" {
		t.Errorf("Retry-After %q, want 1", got)
	}
	if got := res.Header.Get("Content-Type"); got != "application/problem+json" {
		t.Errorf("Content-Type %q", got)
	}
	if !strings.Contains(res.Body, `"type":"https://iana.org/assignments/http-problem-types#temporary-reduced-capacity"`) || !strings.Contains(res.Body, `"status":503`) {
		t.Errorf("body %s", res.Body)
	}
	if got := res.Header.Get("RateLimit-Policy"); got != `"inflight";q=2;qu="concurrent-requests"` {
		t.Errorf("RateLimit-Policy %q", got)
	}
	if st := lim.Adaptive("inflight"); len(st) != 1 || st[0].InFlight != 0 || st[0].Limit != 2 {
		t.Errorf("state after the requests: %+v", st)
	}
}

// TestAdaptiveCarveOutsNeverSampled: probes pass when the limit is full and
// take no slot.
func TestAdaptiveCarveOutsNeverSampled(t *testing.T) {
	g := newGate(200)
	lim := ratelimit.NewRulesLimiter([]ratelimit.Rule{{Name: "inflight", Key: ratelimit.Global(), Adaptive: fixedAdaptive(1)}})
	h := lim.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			return
		}
		g.ServeHTTP(w, r)
	}))
	wait := hold(t, h, g, 1, func() *http.Request { return ratelimittest.NewRequest("GET", "/api", "") })
	for range 50 {
		if res := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/healthz", "")); res.Code != 200 {
			t.Fatalf("/healthz answered %d while the limit was full", res.Code)
		}
	}
	st := lim.Adaptive("inflight")[0]
	close(g.release)
	wait()
	if st.InFlight != 1 {
		t.Fatalf("%d in flight with one request held and 50 probes done", st.InFlight)
	}
}

// TestAdaptivePanickingHandlerIsClassifiedAs500: a handler that writes 200
// and then panics is classified with status 500, not as the success its
// recorded status would say (a request that failed fast would otherwise
// pull the minimum RTT down); one that returns is classified with what it
// wrote, and its slot comes back either way.
func TestAdaptivePanickingHandlerIsClassifiedAs500(t *testing.T) {
	var seen []int
	cfg := fixedAdaptive(1)
	cfg.Classify = func(r *http.Request, status int, elapsed time.Duration) adaptive.Sample {
		seen = append(seen, status)
		return adaptive.DefaultClassify(r, status, elapsed)
	}
	lim := ratelimit.NewRulesLimiter([]ratelimit.Rule{{Name: "inflight", Key: ratelimit.Global(), Adaptive: cfg}})
	h := lim.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		if r.URL.Path == "/panic" {
			panic("handler failed")
		}
	}))
	serve := func(path string) (panicked bool) {
		defer func() { panicked = recover() != nil }()
		ratelimittest.Do(h, ratelimittest.NewRequest("GET", path, ""))
		return false
	}
	if !serve("/panic") {
		t.Fatal("the handler's panic did not reach the caller")
	}
	if serve("/ok") {
		t.Fatal("a handler that returns panicked")
	}
	if len(seen) != 2 || seen[0] != http.StatusInternalServerError || seen[1] != http.StatusOK {
		t.Fatalf("classified statuses %v, want [500 200]", seen)
	}
	if st := lim.Adaptive("inflight")[0]; st.InFlight != 0 {
		t.Fatalf("%d in flight after both requests ended", st.InFlight)
	}
}

// TestAdaptiveUpstream503sLowerTheLimit: the handler's 503s and 504s are
// drops, and windows of them lower the limit; 200s do not. Through Admit,
// on a writer that reports its status.
func TestAdaptiveUpstream503sLowerTheLimit(t *testing.T) {
	for _, status := range []int{200, 503, 504} {
		clock := ratelimittest.NewClock(time.Time{})
		lim := ratelimit.NewRulesLimiter([]ratelimit.Rule{{Name: "inflight", Key: ratelimit.Global(),
			Adaptive: &adaptive.Config{Initial: 40, MinSamples: 5}}}, ratelimit.WithClock(clock))
		for range 3 { // windows of 10 concurrent requests
			var dones []func()
			for range 10 {
				w := ratelimittest.NewDiscardWriter()
				if done, ok := lim.Admit(w, ratelimittest.NewRequest("GET", "/api", "")); ok {
					w.WriteHeader(status)
					dones = append(dones, done)
				}
			}
			clock.Advance(200 * time.Millisecond)
			for _, done := range dones {
				done()
			}
		}
		st := lim.Adaptive("inflight")[0]
		if status == 200 && (st.Limit < 40 || st.Drops != 0 || st.Successes == 0) {
			t.Errorf("after windows of 200s: %+v", st)
		}
		if status != 200 && (st.Limit >= 40 || st.Successes != 0 || st.Drops == 0) {
			t.Errorf("after windows of %ds: %+v", status, st)
		}
	}
}

// TestAdaptiveCriticalRequestsRejectedLast: low-priority requests fill
// only their share; critical ones still get in.
func TestAdaptiveCriticalRequestsRejectedLast(t *testing.T) {
	g := newGate(200)
	a := fixedAdaptive(4)
	a.LowPriorityShare = 0.5
	a.Critical = func(r *http.Request) bool { return r.Header.Get("X-Priority") != "low" }
	h := ratelimit.NewRules([]ratelimit.Rule{{Name: "inflight", Key: ratelimit.Global(), Adaptive: a}})(g)
	low := func() *http.Request { return ratelimittest.NewRequest("GET", "/", "", "X-Priority", "low") }
	high := func() *http.Request { return ratelimittest.NewRequest("GET", "/", "") }
	wait := hold(t, h, g, 2, low)
	lowRes := ratelimittest.Do(h, low())
	wait2 := hold(t, h, g, 2, high)
	highRes := ratelimittest.Do(h, high())
	close(g.release)
	wait()
	wait2()
	if lowRes.Code != 503 || highRes.Code != 503 {
		t.Fatalf("third low-priority request %d, fifth request %d; want both 503", lowRes.Code, highRes.Code)
	}
}

// TestAdaptiveKeysAreBounded: a rule keyed by a client-chosen value keeps
// at most MaxKeys controllers plus the shared one.
func TestAdaptiveKeysAreBounded(t *testing.T) {
	lim := ratelimit.NewRulesLimiter([]ratelimit.Rule{{Name: "per-client", Key: ratelimit.ByHeader("X-Client"),
		Adaptive: &adaptive.Config{MaxKeys: 8}}})
	h := lim.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for i := range 1000 {
		if res := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", "", "X-Client", fmt.Sprint(i, strings.Repeat("x", i)))); res.Code != 200 {
			t.Fatalf("request %d: %d", i, res.Code)
		}
	}
	st := lim.Adaptive("per-client")
	if len(st) != 9 || st[0].Key != adaptive.OverflowKey {
		t.Fatalf("%d states (want 8 keys and the overflow), first key %q", len(st), st[0].Key)
	}
	if lim.Adaptive("nope") != nil {
		t.Fatal("state of a rule that does not exist")
	}
}

// TestAdaptiveIdleKeysGiveWayToNewOnes: once a keyed rule holds MaxKeys
// controllers, a new key shares the overflow controller while they are in
// use, and takes the place of an idle one (no request in flight, none for
// the longer of 10 Windows and MinRTTHorizon) once there is one, looked
// for at most once a Window; a key with a request in flight is never
// dropped.
func TestAdaptiveIdleKeysGiveWayToNewOnes(t *testing.T) {
	clock := ratelimittest.NewClock(ratelimittest.Epoch())
	lim := ratelimit.NewRulesLimiter([]ratelimit.Rule{{Name: "per-client", Key: ratelimit.ByHeader("X-Client"),
		Adaptive: &adaptive.Config{MaxKeys: 2, Window: time.Second, MinRTTHorizon: 5 * time.Second}}},
		ratelimit.WithClock(clock))
	g := newGate(200)
	h := lim.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Client") == "a" {
			g.ServeHTTP(w, r)
		}
	}))
	req := func(client string) *http.Request { return ratelimittest.NewRequest("GET", "/", "", "X-Client", client) }
	wait := hold(t, h, g, 1, func() *http.Request { return req("a") }) // a stays in flight
	ratelimittest.Do(h, req("b"))
	keys := func() []string {
		var ks []string
		for _, st := range lim.Adaptive("per-client") {
			ks = append(ks, st.Key)
		}
		return ks
	}
	ratelimittest.Do(h, req("c"))
	if got, want := keys(), []string{adaptive.OverflowKey, "a", "b"}; !slices.Equal(got, want) {
		t.Fatalf("with a and b in use, keys %q; want c in the overflow: %q", got, want)
	}
	clock.Advance(10*time.Second - time.Nanosecond)
	ratelimittest.Do(h, req("c"))
	if got, want := keys(), []string{adaptive.OverflowKey, "a", "b"}; !slices.Equal(got, want) {
		t.Fatalf("with b idle for less than 10 s, keys %q; want c still in the overflow: %q", got, want)
	}
	clock.Advance(time.Second) // idle keys are looked for at most once a Window
	ratelimittest.Do(h, req("c"))
	if got, want := keys(), []string{adaptive.OverflowKey, "a", "c"}; !slices.Equal(got, want) {
		t.Fatalf("with b idle and a in flight, keys %q; want c in b's place: %q", got, want)
	}
	close(g.release)
	wait()
}

// TestAdaptiveSlotFreedWhenAnotherRuleDenies: a request denied by a rate
// rule gives its adaptive slot back, and answers 429 for that rule.
func TestAdaptiveSlotFreedWhenAnotherRuleDenies(t *testing.T) {
	lim := ratelimit.NewRulesLimiter([]ratelimit.Rule{
		{Name: "inflight", Key: ratelimit.Global(), Adaptive: fixedAdaptive(1)},
		{Name: "rate", Key: ratelimit.Global(), Limit: ratelimit.PerHour(1)},
	})
	h := lim.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	codes := []int{}
	for range 3 {
		codes = append(codes, ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", "")).Code)
	}
	if codes[0] != 200 || codes[1] != 429 || codes[2] != 429 {
		t.Fatalf("codes %v, want 200 then 429s (the slot freed each time)", codes)
	}
	if st := lim.Adaptive("inflight")[0]; st.InFlight != 0 {
		t.Fatalf("%d in flight", st.InFlight)
	}
}

// TestAdaptiveDoneTwiceReleasesOnce: an adapter calling done twice does not
// free another request's slot.
func TestAdaptiveDoneTwiceReleasesOnce(t *testing.T) {
	lim := ratelimit.NewRulesLimiter([]ratelimit.Rule{{Name: "inflight", Key: ratelimit.Global(), Adaptive: fixedAdaptive(2)}})
	w := httptest.NewRecorder()
	done1, ok1 := lim.Admit(w, ratelimittest.NewRequest("GET", "/", ""))
	_, ok2 := lim.Admit(w, ratelimittest.NewRequest("GET", "/", ""))
	done1()
	done1()
	if st := lim.Adaptive("inflight")[0]; !ok1 || !ok2 || st.InFlight != 1 {
		t.Fatalf("admitted %v %v; %d in flight after one request released twice, want 1", ok1, ok2, st.InFlight)
	}
}

// TestAdaptiveKeyErrorPolicy: a request without a key is rejected by
// default, and shares the overflow controller with KeyErrorPolicy.Shared.
func TestAdaptiveKeyErrorPolicy(t *testing.T) {
	rules := []ratelimit.Rule{{Name: "inflight", Key: ratelimit.ByHeader("X-Client"), Adaptive: &adaptive.Config{}}}
	next := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	if res := ratelimittest.Do(ratelimit.NewRules(rules)(next), ratelimittest.NewRequest("GET", "/", "")); res.Code != 400 {
		t.Fatalf("keyless request: %d, want 400", res.Code)
	}
	lim := ratelimit.NewRulesLimiter(rules, ratelimit.OnKeyError(ratelimit.KeyErrorPolicy{Shared: true}))
	if res := ratelimittest.Do(lim.Handler(next), ratelimittest.NewRequest("GET", "/", "")); res.Code != 200 {
		t.Fatalf("keyless request with a shared bucket: %d, want 200", res.Code)
	}
	if st := lim.Adaptive("inflight"); len(st) != 1 || st[0].Key != adaptive.OverflowKey {
		t.Fatalf("states %+v", st)
	}
}

// TestAdaptiveShadowNeverRejects: a shadow adaptive rule reports
// ShadowDenied and admits.
func TestAdaptiveShadowNeverRejects(t *testing.T) {
	var shadow int
	var mu sync.Mutex
	obs := ratelimit.ObserverFunc(func(e ratelimit.Event) {
		if e.Outcome == ratelimit.OutcomeShadowDenied {
			mu.Lock()
			shadow++
			mu.Unlock()
		}
	})
	g := newGate(200)
	lim := ratelimit.NewRulesLimiter([]ratelimit.Rule{{Name: "inflight", Key: ratelimit.Global(), Shadow: true, Adaptive: fixedAdaptive(1)}}, ratelimit.WithObserver(obs))
	h := lim.Handler(g)
	get := func() *http.Request { return ratelimittest.NewRequest("GET", "/", "") }
	wait := hold(t, h, g, 3, get)
	close(g.release)
	wait()
	if shadow != 2 {
		t.Fatalf("%d ShadowDenied events, want 2", shadow)
	}
}

// TestAdaptiveDefaultClassify pins the default classification.
func TestAdaptiveDefaultClassify(t *testing.T) {
	r := ratelimittest.NewRequest("GET", "/", "")
	expired, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel()
	gone, cancel2 := context.WithCancel(context.Background())
	cancel2()
	for _, c := range []struct {
		r      *http.Request
		status int
		want   adaptive.Sample
	}{
		{r, 200, adaptive.SampleSuccess}, {r, 0, adaptive.SampleSuccess}, {r, 404, adaptive.SampleSuccess},
		{r, 503, adaptive.SampleDrop}, {r, 502, adaptive.SampleDrop}, {r, 504, adaptive.SampleDrop},
		{r, 500, adaptive.SampleIgnore}, {r, 429, adaptive.SampleIgnore},
		{r.WithContext(expired), 200, adaptive.SampleAbandoned}, {r.WithContext(gone), 200, adaptive.SampleAbandoned},
		{r, 499, adaptive.SampleAbandoned}, {r.WithContext(expired), 504, adaptive.SampleAbandoned},
	} {
		if got := adaptive.DefaultClassify(c.r, c.status, time.Millisecond); got != c.want {
			t.Errorf("status %d, context error %v: %v, want %v", c.status, c.r.Context().Err(), got, c.want)
		}
	}
}

// TestAdaptiveSeveralRules: with three adaptive rules the tightest rejects,
// and the slots the others took for the rejected request are given back.
func TestAdaptiveSeveralRules(t *testing.T) {
	g := newGate(200)
	lim := ratelimit.NewRulesLimiter([]ratelimit.Rule{
		{Name: "a", Key: ratelimit.Global(), Adaptive: fixedAdaptive(5)},
		{Name: "b", Key: ratelimit.Global(), Adaptive: fixedAdaptive(5)},
		{Name: "tight", Key: ratelimit.Global(), Adaptive: fixedAdaptive(2)},
	})
	h := lim.Handler(g)
	get := func() *http.Request { return ratelimittest.NewRequest("GET", "/", "") }
	wait := hold(t, h, g, 2, get)
	res := ratelimittest.Do(h, get())
	inA, inB := lim.Adaptive("a")[0].InFlight, lim.Adaptive("b")[0].InFlight
	close(g.release)
	wait()
	if res.Code != 503 || !strings.Contains(res.Body, `"violated-policies":["tight"]`) {
		t.Fatalf("third request: %d %s", res.Code, res.Body)
	}
	if inA != 2 || inB != 2 {
		t.Fatalf("in flight under a and b: %d, %d; want 2 (the rejected request's slots given back)", inA, inB)
	}
}

// TestAdaptiveObserverSeesLimit: observers get an Allowed event per
// admitted request and a Denied event per rejection, with the limit as
// Result.Limit.Rate and the free slots as Remaining.
func TestAdaptiveObserverSeesLimit(t *testing.T) {
	var mu sync.Mutex
	var events []ratelimit.Event
	obs := ratelimit.ObserverFunc(func(e ratelimit.Event) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	})
	lim := ratelimit.NewRulesLimiter([]ratelimit.Rule{{Name: "inflight", Key: ratelimit.Global(), Adaptive: fixedAdaptive(2)}}, ratelimit.WithObserver(obs))
	res := overTheLimit(t, lim, 2)
	mu.Lock()
	defer mu.Unlock()
	var allowed, denied []ratelimit.Event
	for _, e := range events {
		switch {
		case e.Rule != "inflight":
		case e.Outcome == ratelimit.OutcomeAllowed:
			allowed = append(allowed, e)
		case e.Outcome == ratelimit.OutcomeDenied:
			denied = append(denied, e)
		}
	}
	if res.Code != 503 || len(allowed) != 2 || len(denied) != 1 {
		t.Fatalf("status %d; %d Allowed and %d Denied events, want 2 and 1", res.Code, len(allowed), len(denied))
	}
	remaining := map[int]bool{}
	for _, e := range allowed {
		remaining[e.Result.Remaining] = true
		if e.Result.Limit.Rate != 2 || !e.Result.Allowed {
			t.Errorf("Allowed event %+v", e.Result)
		}
	}
	if !remaining[0] || !remaining[1] {
		t.Errorf("Remaining of the admissions %v, want 1 and 0", remaining)
	}
	if d := denied[0].Result; d.Allowed || d.Limit.Rate != 2 || d.Remaining != 0 || d.RetryAfter != time.Second {
		t.Errorf("Denied event %+v", d)
	}
}

// TestAdaptiveSlotFreedWhenAKeyFuncPanics: a KeyFunc of another rule that
// panics (net/http recovers the handler's panic) gives the adaptive slot
// back: otherwise each such request would hold one for good, and after
// the limit's worth of them every request would be rejected.
func TestAdaptiveSlotFreedWhenAKeyFuncPanics(t *testing.T) {
	panicky := ratelimit.KeyFunc(func(r *http.Request) (string, error) {
		if r.Header.Get("X-Boom") != "" {
			panic("key func bug")
		}
		return "k", nil
	})
	lim := ratelimit.NewRulesLimiter([]ratelimit.Rule{
		{Name: "inflight", Key: ratelimit.Global(), Adaptive: fixedAdaptive(1)},
		{Name: "rate", Key: panicky, Limit: ratelimit.PerHour(100)},
	})
	h := lim.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for i := range 3 {
		func() {
			defer func() {
				if recover() == nil {
					t.Fatalf("request %d: the KeyFunc's panic did not reach the server", i)
				}
			}()
			r := ratelimittest.NewRequest("GET", "/", "")
			r.Header.Set("X-Boom", "1")
			ratelimittest.Do(h, r)
		}()
	}
	if st := lim.Adaptive("inflight")[0]; st.InFlight != 0 {
		t.Fatalf("%d in flight after three panicking requests, want 0", st.InFlight)
	}
	if code := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", "")).Code; code != http.StatusOK {
		t.Errorf("a request after the panics: status %d, want 200", code)
	}
}
