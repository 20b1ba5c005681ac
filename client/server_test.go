package ratelimitclient_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dunglas/httpsfv"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/adaptive"
	ratelimitclient "github.com/sluicehq/ratelimit/client"
)

// serverCase is a server's rules and a client that stays within all of
// them: n requests, one at a time, gap apart.
type serverCase struct {
	name  string
	rules []ratelimit.Rule
	opts  []ratelimit.Option
	n     int
	gap   time.Duration
	cost  int // what the handler settles, with a settled rule
}

func serverCases() []serverCase {
	global := ratelimit.Global()
	inflight := ratelimit.Rule{Name: "inflight", Limit: ratelimit.Limit{Rate: 2, Period: time.Minute}, Algorithm: ratelimit.Concurrency, Key: global}
	return []serverCase{
		{name: "gcra", rules: []ratelimit.Rule{{Name: "gcra", Limit: ratelimit.PerMinute(6), Key: global}}, n: 12, gap: 10 * time.Second},
		{name: "gcra burst", rules: []ratelimit.Rule{{Name: "burst", Limit: ratelimit.PerSecond(1).WithBurst(5), Key: global}}, n: 10, gap: time.Second},
		{name: "fixed window", rules: []ratelimit.Rule{{Name: "fixed", Limit: ratelimit.PerMinute(6), Algorithm: ratelimit.FixedWindow, Key: global}}, n: 14, gap: 10 * time.Second},
		{name: "sliding window", rules: []ratelimit.Rule{{Name: "sliding", Limit: ratelimit.PerMinute(6), Algorithm: ratelimit.SlidingWindow, Key: global}}, n: 14, gap: 12 * time.Second},
		{name: "quota", rules: []ratelimit.Rule{{Name: "daily", Quota: ratelimit.Daily(24, nil), Key: global}}, n: 30, gap: time.Hour},
		{name: "concurrency", rules: []ratelimit.Rule{inflight}, n: 6},
		{name: "adaptive", rules: []ratelimit.Rule{{Name: "adaptive", Key: global, Adaptive: &adaptive.Config{Min: 2, Max: 8, Initial: 4}}}, n: 6},
		{name: "paced", rules: []ratelimit.Rule{{Name: "paced", Limit: ratelimit.PerMinute(6), Key: global, Pace: ratelimit.Pace{MaxDelay: 30 * time.Second}}}, n: 12, gap: 10 * time.Second},
		{name: "settled", rules: []ratelimit.Rule{{Name: "tokens", Limit: ratelimit.PerMinute(600), Key: global, Settled: true,
			Cost: func(*http.Request) int { return 100 }}}, n: 12, gap: 10 * time.Second, cost: 80},
		{name: "stacked", rules: []ratelimit.Rule{
			{Name: "per-second", Limit: ratelimit.PerSecond(2), Key: global},
			{Name: "per-minute", Limit: ratelimit.PerMinute(100), Algorithm: ratelimit.FixedWindow, Key: global},
			{Name: "sliding", Limit: ratelimit.PerMinute(100), Algorithm: ratelimit.SlidingWindow, Key: global},
			{Name: "daily", Quota: ratelimit.Daily(10_000, nil), Key: global},
			inflight,
		}, n: 20, gap: time.Second},
	}
}

// TestClientWithinEveryLimitIsNeverSlowed runs this module's Transport
// against the core's middleware for every kind of rule, one request at a
// time at a pace within every limit: no request waits (virtual time does not
// move while one is in flight), none is throttled, and every response's
// rate-limit fields are those draft-ietf-httpapi-ratelimit-headers-11
// defines, as parsed by an independent Structured Fields parser (see
// checkFields). Against the server of issue #27, the Concurrency rule's
// "inflight";r=1;t=60 made the Transport wait about a minute before each
// request that a plain http.Client sent in a millisecond.
func TestClientWithinEveryLimitIsNeverSlowed(t *testing.T) {
	for _, c := range serverCases() {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if c.cost > 0 {
						ratelimit.Settle(r.Context(), w, c.cost)
					}
					io.WriteString(w, "ok")
				})
				ts, base := memServer(t, ratelimit.NewRules(c.rules, c.opts...)(ok))
				var mu sync.Mutex
				var events []ratelimitclient.Event
				tr := &ratelimitclient.Transport{
					Base: &conformance{t: t, next: base},
					Observer: func(e ratelimitclient.Event) {
						mu.Lock()
						events = append(events, e)
						mu.Unlock()
					},
				}
				for i := range c.n {
					start := time.Now()
					resp, err := send(tr, get(ts.URL+"/"))
					if err != nil {
						t.Fatalf("request %d: %v", i+1, err)
					}
					if took := time.Since(start); resp.StatusCode != http.StatusOK || took > 0 {
						t.Errorf("request %d: status %d after %v; want 200 at once", i+1, resp.StatusCode, took)
					}
					time.Sleep(c.gap)
				}
				mu.Lock()
				defer mu.Unlock()
				for _, e := range events {
					t.Errorf("the Transport reported %+v; want no wait, throttle or retry", e)
				}
			})
		})
	}
}

// conformance is a RoundTripper that checks the rate-limit fields of every
// response it passes on.
type conformance struct {
	t    *testing.T
	next http.RoundTripper
}

func (c *conformance) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(req)
	if err == nil {
		checkFields(c.t, resp)
	}
	return resp, err
}

// quotaUnits are the quota units draft-ietf-httpapi-ratelimit-headers-11
// defines (Section 3.1.2).
var quotaUnits = map[string]bool{"requests": true, "content-bytes": true, "concurrent-requests": true}

// checkFields checks resp's RateLimit-Policy and RateLimit fields against
// draft-ietf-httpapi-ratelimit-headers-11, parsing them with httpsfv (RFC
// 9651), not with this module's parser:
//
//   - RateLimit-Policy (Section 3) is a List of Items whose values are
//     Strings, each with q, a non-negative Integer; qu, when present, a
//     String naming a registered unit; w, when present, a positive Integer;
//     pk, when present, a Byte Sequence.
//   - RateLimit (Section 4) is a List of Items whose values are Strings
//     naming a policy the response lists, each with r, a non-negative
//     Integer, and t, when present, a non-negative Integer; a member of a
//     concurrent-requests policy has no t (its slots come back with
//     requests, not at a time), a member of any other a t.
//   - With Retry-After, t does not end later than Retry-After (Section 6).
//   - A 429's problem body names in violated-policies (Section 5.1) only
//     policies the response lists.
func checkFields(t *testing.T, resp *http.Response) {
	t.Helper()
	h := resp.Header
	units := map[string]string{}
	if v := h.Values("RateLimit-Policy"); len(v) > 0 {
		list, err := httpsfv.UnmarshalList(v)
		if err != nil {
			t.Errorf("RateLimit-Policy %q is not a Structured Fields List: %v", v, err)
			return
		}
		for _, m := range list {
			it, name, ok := stringItem(t, "RateLimit-Policy", m)
			if !ok {
				continue
			}
			if q, ok := it.Params.Get("q"); !nonNegative(q, ok) {
				t.Errorf("RateLimit-Policy member %q: q %v; want a non-negative Integer", name, q)
			}
			unit := "requests"
			if qu, ok := it.Params.Get("qu"); ok {
				s, isString := qu.(string)
				if !isString || !quotaUnits[s] {
					t.Errorf("RateLimit-Policy member %q: qu %#v; want a String among %v", name, qu, quotaUnits)
				}
				unit = s
			}
			if w, ok := it.Params.Get("w"); ok {
				if n, isInt := w.(int64); !isInt || n <= 0 {
					t.Errorf("RateLimit-Policy member %q: w %#v; want a positive Integer", name, w)
				}
			}
			if pk, ok := it.Params.Get("pk"); ok {
				if _, isBytes := pk.([]byte); !isBytes {
					t.Errorf("RateLimit-Policy member %q: pk %#v; want a Byte Sequence", name, pk)
				}
			}
			units[name] = unit
		}
	}
	retryAfter, hasRetry := int64(0), false
	if v := h.Get("Retry-After"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			t.Errorf("Retry-After %q: want delay-seconds", v)
		}
		retryAfter, hasRetry = n, true
	}
	if v := h.Values("RateLimit"); len(v) > 0 {
		list, err := httpsfv.UnmarshalList(v)
		if err != nil {
			t.Errorf("RateLimit %q is not a Structured Fields List: %v", v, err)
			return
		}
		for _, m := range list {
			it, name, ok := stringItem(t, "RateLimit", m)
			if !ok {
				continue
			}
			unit, listed := units[name]
			if !listed {
				t.Errorf("RateLimit member %q names no policy of RateLimit-Policy %q", name, h.Values("RateLimit-Policy"))
			}
			if r, ok := it.Params.Get("r"); !nonNegative(r, ok) {
				t.Errorf("RateLimit member %q: r %v; want a non-negative Integer", name, r)
			}
			tv, hasT := it.Params.Get("t")
			switch {
			case hasT && !nonNegative(tv, true):
				t.Errorf("RateLimit member %q: t %#v; want a non-negative Integer", name, tv)
			case unit == "concurrent-requests" && hasT:
				t.Errorf("RateLimit member %q of a concurrent-requests policy has t=%v: slots come back when requests finish", name, tv)
			case listed && unit != "concurrent-requests" && !hasT:
				t.Errorf("RateLimit member %q of a %s policy has no t", name, unit)
			case hasT && hasRetry && tv.(int64) > retryAfter:
				t.Errorf("RateLimit member %q: t=%d ends after Retry-After: %d", name, tv, retryAfter)
			}
		}
	}
	if resp.StatusCode == http.StatusTooManyRequests && strings.HasPrefix(h.Get("Content-Type"), "application/problem+json") {
		body, _ := io.ReadAll(resp.Body)
		resp.Body = io.NopCloser(strings.NewReader(string(body)))
		var p struct {
			Violated []string `json:"violated-policies"`
		}
		if err := json.Unmarshal(body, &p); err != nil {
			t.Errorf("429 body %q: %v", body, err)
		}
		for _, name := range p.Violated {
			if _, ok := units[name]; !ok {
				t.Errorf("429 body names violated policy %q, which RateLimit-Policy %q does not list", name, h.Values("RateLimit-Policy"))
			}
		}
	}
}

// stringItem returns m as an Item whose value is a String, the policy's
// name, reporting any other member.
func stringItem(t *testing.T, field string, m httpsfv.Member) (httpsfv.Item, string, bool) {
	t.Helper()
	it, ok := m.(httpsfv.Item)
	if !ok {
		t.Errorf("%s member %#v is not an Item", field, m)
		return httpsfv.Item{}, "", false
	}
	name, ok := it.Value.(string)
	if !ok {
		t.Errorf("%s member value %#v is not a String", field, it.Value)
		return httpsfv.Item{}, "", false
	}
	return it, name, true
}

// nonNegative reports whether a parameter v, present when ok, is a
// non-negative Integer.
func nonNegative(v any, ok bool) bool {
	n, isInt := v.(int64)
	return ok && isInt && n >= 0
}
