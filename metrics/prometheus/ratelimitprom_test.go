package ratelimitprom_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/breaker"
	ratelimitprom "github.com/sluicehq/ratelimit/metrics/prometheus"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores"
)

// scrape GETs url and parses the text exposition.
func scrape(t *testing.T, c *http.Client, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("Content-Type %q, want the text exposition format", ct)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mf, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return mf
}

// series flattens a family into `{label="value",...}` → value, labels sorted.
func series(mf *dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	if mf == nil {
		return out
	}
	for _, m := range mf.GetMetric() {
		var parts []string
		for _, l := range m.GetLabel() {
			parts = append(parts, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
		}
		slices.Sort(parts)
		k := "{" + strings.Join(parts, ",") + "}"
		switch {
		case m.Counter != nil:
			out[k] = m.GetCounter().GetValue()
		case m.Gauge != nil:
			out[k] = m.GetGauge().GetValue()
		case m.Histogram != nil:
			out[k] = float64(m.GetHistogram().GetSampleCount())
		}
	}
	return out
}

func equal(t *testing.T, what string, got, want map[string]float64) {
	t.Helper()
	if !maps.Equal(got, want) {
		t.Errorf("%s:\ngot  %v\nwant %v", what, got, want)
	}
}

// TestScrape runs the middleware and the /metrics endpoint in one real HTTP
// server and checks what a scrape returns.
func TestScrape(t *testing.T) {
	reg := prometheus.NewRegistry()
	obs := ratelimitprom.New()
	reg.MustRegister(obs)

	clock := ratelimittest.NewClock(time.Time{}) // time stands still: no refill
	mw := ratelimit.NewRules([]ratelimit.Rule{
		{Name: "per-ip", Limit: ratelimit.PerMinute(3), Key: ratelimit.ByIP(), KeyKind: "ip"},
		// A stricter limit being rolled out: counted, never enforced.
		{Name: "per-ip-strict", Limit: ratelimit.PerMinute(2), Key: ratelimit.ByIP(), KeyKind: "ip", Shadow: true},
	}, ratelimit.WithClock(clock), ratelimit.WithObserver(obs))

	mux := http.NewServeMux()
	mux.HandleFunc("/api", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := httptest.NewServer(mw(mux))
	defer srv.Close()
	c := srv.Client()

	var codes []int
	for range 5 {
		resp, err := c.Get(srv.URL + "/api")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		codes = append(codes, resp.StatusCode)
	}
	if want := []int{200, 200, 200, 429, 429}; !slices.Equal(codes, want) {
		t.Fatalf("status codes %v, want %v", codes, want)
	}
	for range 2 {
		resp, err := c.Get(srv.URL + "/healthz") // carved out
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}

	// The scrape is carved out too, and counted before it is served.
	mf := scrape(t, c, srv.URL+"/metrics")
	equal(t, "ratelimit_decisions_total", series(mf["ratelimit_decisions_total"]), map[string]float64{
		`{key_kind="ip",outcome="allowed",rule="per-ip"}`:              3,
		`{key_kind="ip",outcome="denied",rule="per-ip"}`:               2,
		`{key_kind="ip",outcome="allowed",rule="per-ip-strict"}`:       2,
		`{key_kind="ip",outcome="shadow_denied",rule="per-ip-strict"}`: 3,
		`{key_kind="",outcome="skipped",rule=""}`:                      3,
	})
	// One store call per rule and request; skipped requests have none.
	equal(t, "ratelimit_store_duration_seconds", series(mf["ratelimit_store_duration_seconds"]), map[string]float64{
		`{rule="per-ip"}`:        5,
		`{rule="per-ip-strict"}`: 5,
	})
	if got := mf["ratelimit_decisions_total"].GetType(); got != dto.MetricType_COUNTER {
		t.Errorf("ratelimit_decisions_total is a %v", got)
	}

	// Scrapes are counted as they come.
	mf = scrape(t, c, srv.URL+"/metrics")
	if got := series(mf["ratelimit_decisions_total"])[`{key_kind="",outcome="skipped",rule=""}`]; got != 4 {
		t.Errorf("skipped after a second scrape = %v, want 4", got)
	}
}

func gather(t *testing.T, c prometheus.Collector) map[string]*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		out[f.GetName()] = f
	}
	return out
}

func TestOutcomes(t *testing.T) {
	obs := ratelimitprom.New()
	for o := ratelimit.OutcomeAllowed; o <= ratelimit.OutcomeFallback; o++ {
		obs.Observe(ratelimit.Event{Rule: "r", KeyKind: "user", Outcome: o})
	}
	obs.Observe(ratelimit.Event{Rule: "r", KeyKind: "user", Outcome: ratelimit.Outcome(200)})
	want := map[string]float64{}
	for _, name := range []string{"allowed", "denied", "shadow_denied", "skipped", "key_error", "store_error", "fallback", "unknown"} {
		want[fmt.Sprintf(`{key_kind="user",outcome=%q,rule="r"}`, name)] = 1
	}
	equal(t, "decisions", series(gather(t, obs)["ratelimit_decisions_total"]), want)
}

// TestKeyError counts a request whose key cannot be extracted.
func TestKeyError(t *testing.T) {
	obs := ratelimitprom.New()
	h := ratelimit.New(ratelimit.PerMinute(10), ratelimit.ByAPIKey("X-API-Key"),
		ratelimit.WithName("api"),
		ratelimit.WithClock(ratelimittest.NewClock(time.Time{})), ratelimit.WithObserver(obs),
	)(http.NotFoundHandler())
	if r := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/x", "")); r.Code != http.StatusBadRequest {
		t.Fatalf("no key: %d", r.Code)
	}
	ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/x", "", "X-API-Key", "k1"))
	equal(t, "decisions", series(gather(t, obs)["ratelimit_decisions_total"]), map[string]float64{
		`{key_kind="api_key",outcome="key_error",rule="api"}`: 1,
		`{key_kind="api_key",outcome="allowed",rule="api"}`:   1,
	})
}

// TestCardinalityCap checks that rule names beyond the cap are folded.
func TestCardinalityCap(t *testing.T) {
	obs := ratelimitprom.New(ratelimitprom.WithMaxRules(3))
	for i := range 10 {
		rule := fmt.Sprintf("tenant-%d", i)
		for range i + 1 {
			obs.Observe(ratelimit.Event{Rule: rule, KeyKind: "tenant", Outcome: ratelimit.OutcomeAllowed, Latency: time.Millisecond})
		}
		obs.Observe(ratelimit.Event{Rule: rule, KeyKind: "tenant", Outcome: ratelimit.OutcomeDenied})
	}
	// An admitted rule keeps its series after the cap is reached.
	obs.Observe(ratelimit.Event{Rule: "tenant-0", KeyKind: "tenant", Outcome: ratelimit.OutcomeDenied})
	// A known rule under a new key kind is a new pair.
	obs.Observe(ratelimit.Event{Rule: "tenant-0", KeyKind: "ip", Outcome: ratelimit.OutcomeAllowed})

	mf := gather(t, obs)
	equal(t, "decisions", series(mf["ratelimit_decisions_total"]), map[string]float64{
		`{key_kind="tenant",outcome="allowed",rule="tenant-0"}`: 1,
		`{key_kind="tenant",outcome="denied",rule="tenant-0"}`:  2,
		`{key_kind="tenant",outcome="allowed",rule="tenant-1"}`: 2,
		`{key_kind="tenant",outcome="denied",rule="tenant-1"}`:  1,
		`{key_kind="tenant",outcome="allowed",rule="tenant-2"}`: 3,
		`{key_kind="tenant",outcome="denied",rule="tenant-2"}`:  1,
		`{key_kind="other",outcome="allowed",rule="other"}`:     4 + 5 + 6 + 7 + 8 + 9 + 10 + 1,
		`{key_kind="other",outcome="denied",rule="other"}`:      7,
	})
	equal(t, "durations", series(mf["ratelimit_store_duration_seconds"]), map[string]float64{
		`{rule="tenant-0"}`: 1,
		`{rule="tenant-1"}`: 2,
		`{rule="tenant-2"}`: 3,
		`{rule="other"}`:    4 + 5 + 6 + 7 + 8 + 9 + 10,
	})
}

// TestCardinalityCapConcurrent races many new rule names against the cap.
func TestCardinalityCapConcurrent(t *testing.T) {
	const maxRules, workers, names = 50, 8, 400
	obs := ratelimitprom.New(ratelimitprom.WithMaxRules(maxRules))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range names {
				obs.Observe(ratelimit.Event{Rule: fmt.Sprintf("r%d", (i*7+w)%names), KeyKind: "k", Outcome: ratelimit.OutcomeAllowed})
			}
		})
	}
	wg.Wait()
	got := series(gather(t, obs)["ratelimit_decisions_total"])
	total, other := 0.0, 0.0
	for k, v := range got {
		total += v
		if strings.Contains(k, `rule="other"`) {
			other = v
		}
	}
	if len(got) != maxRules+1 || total != workers*names || other == 0 {
		t.Errorf("%d series (want %d), %v decisions (want %d), %v other", len(got), maxRules+1, total, workers*names, other)
	}
}

func TestLatency(t *testing.T) {
	obs := ratelimitprom.New(ratelimitprom.WithBuckets(0.001, 0.01))
	obs.Observe(ratelimit.Event{Rule: "r", KeyKind: "ip", Outcome: ratelimit.OutcomeAllowed, Latency: 2 * time.Millisecond})
	obs.Observe(ratelimit.Event{Rule: "r", KeyKind: "ip", Outcome: ratelimit.OutcomeDenied, Latency: 20 * time.Millisecond})
	obs.Observe(ratelimit.Event{Rule: "r", KeyKind: "ip", Outcome: ratelimit.OutcomeAllowed}) // no store call
	// The fallback's decision follows with the same latency: timed once.
	obs.Observe(ratelimit.Event{Rule: "r", KeyKind: "ip", Outcome: ratelimit.OutcomeFallback, Latency: time.Second})
	obs.Observe(ratelimit.Event{Rule: "q", KeyKind: "ip", Outcome: ratelimit.OutcomeAllowed}) // never timed

	mf := gather(t, obs)
	hs := mf["ratelimit_store_duration_seconds"].GetMetric()
	if len(hs) != 1 {
		t.Fatalf("%d histograms, want 1 (rule r)", len(hs))
	}
	h := hs[0].GetHistogram()
	if h.GetSampleCount() != 2 || h.GetSampleSum() != 0.022 {
		t.Errorf("count %d sum %v, want 2 and 0.022", h.GetSampleCount(), h.GetSampleSum())
	}
	var cum []uint64
	for _, b := range h.GetBucket() {
		cum = append(cum, b.GetCumulativeCount())
	}
	if !slices.Equal(cum, []uint64{0, 1}) {
		t.Errorf("buckets %v, want [0 1]", cum)
	}
}

// failing is a Store whose backend is down.
type failing struct{}

var errDown = errors.New("connection refused")

func (failing) Take(context.Context, stores.Request) (ratelimit.Result, error) {
	return ratelimit.Result{}, errDown
}
func (failing) TakeAll(context.Context, []stores.Request, []ratelimit.Result) error {
	return errDown
}
func (failing) Return(context.Context, stores.Request) error { return errDown }

func TestBreakerState(t *testing.T) {
	obs := ratelimitprom.New()
	clock := ratelimittest.NewClock(time.Time{})
	b := breaker.New(failing{}, breaker.Config{
		Failures: 2, Cooldown: time.Second, Clock: clock,
		OnStateChange: obs.BreakerStateChange("redis"),
	})
	state := func() float64 {
		t.Helper()
		return series(gather(t, obs)["ratelimit_breaker_state"])[`{name="redis"}`]
	}
	if s := state(); s != 0 {
		t.Fatalf("new breaker: state %v, want 0 (closed)", s)
	}
	ctx := context.Background()
	req := stores.Request{Rule: "r", Key: "k", Limit: ratelimit.PerSecond(1), Cost: 1}
	b.Take(ctx, req)
	b.Take(ctx, req)
	if s := state(); s != 1 {
		t.Fatalf("after 2 failures: state %v, want 1 (open)", s)
	}
	clock.Advance(time.Second)
	b.Take(ctx, req) // the probe fails: open again
	if s := state(); s != 1 {
		t.Fatalf("after a failed probe: state %v, want 1 (open)", s)
	}
	f := obs.BreakerStateChange("replica")
	f(breaker.Open, breaker.HalfOpen)
	equal(t, "breaker states", series(gather(t, obs)["ratelimit_breaker_state"]), map[string]float64{
		`{name="redis"}`:   1,
		`{name="replica"}`: 2,
	})
}

func TestRegisterTwice(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(ratelimitprom.New())
	if err := reg.Register(ratelimitprom.New()); err == nil {
		t.Fatal("a second Observer on one registry registered; want a duplicate error")
	}
	// Two Observers on one registry: wrap each one's registerer.
	reg = prometheus.NewRegistry()
	prometheus.WrapRegistererWith(prometheus.Labels{"limiter": "public"}, reg).MustRegister(ratelimitprom.New())
	prometheus.WrapRegistererWith(prometheus.Labels{"limiter": "admin"}, reg).MustRegister(ratelimitprom.New())
}

func TestObserveAllocs(t *testing.T) {
	obs := ratelimitprom.New()
	e := ratelimit.Event{Rule: "per-ip", KeyKind: "ip", Outcome: ratelimit.OutcomeAllowed, Latency: time.Millisecond}
	obs.Observe(e)
	if n := testing.AllocsPerRun(1000, func() { obs.Observe(e) }); n != 0 {
		t.Errorf("Observe allocates %v times, want 0", n)
	}
	full := ratelimitprom.New(ratelimitprom.WithMaxRules(1))
	full.Observe(e)
	over := ratelimit.Event{Rule: "tenant-1234", KeyKind: "tenant", Outcome: ratelimit.OutcomeDenied}
	full.Observe(over)
	if n := testing.AllocsPerRun(1000, func() { full.Observe(over) }); n != 0 {
		t.Errorf("Observe of a folded rule allocates %v times, want 0", n)
	}
}

func BenchmarkObserve(b *testing.B) {
	obs := ratelimitprom.New()
	rules := []string{"global", "per-ip", "tiers-rate", "tiers-quota", "tiers-concurrency"}
	events := make([]ratelimit.Event, 0, len(rules)*2)
	for _, r := range rules {
		events = append(events,
			ratelimit.Event{Rule: r, KeyKind: "ip", Outcome: ratelimit.OutcomeAllowed, Latency: 40 * time.Microsecond},
			ratelimit.Event{Rule: r, KeyKind: "ip", Outcome: ratelimit.OutcomeDenied, Latency: 40 * time.Microsecond})
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			obs.Observe(events[i%len(events)])
			i++
		}
	})
}

func BenchmarkObserveFolded(b *testing.B) {
	obs := ratelimitprom.New(ratelimitprom.WithMaxRules(1))
	obs.Observe(ratelimit.Event{Rule: "first", KeyKind: "tenant"})
	e := ratelimit.Event{Rule: "tenant-42", KeyKind: "tenant", Outcome: ratelimit.OutcomeAllowed}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			obs.Observe(e)
		}
	})
}
