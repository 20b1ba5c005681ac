package ratelimitotel_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/breaker"
	ratelimitotel "github.com/sluicehq/ratelimit/metrics/otel"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// newObserver returns an Observer on a fresh SDK with a ManualReader.
func newObserver(t testing.TB, opts ...ratelimitotel.Option) (*ratelimitotel.Observer, *sdkmetric.ManualReader) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { provider.Shutdown(context.Background()) })
	obs, err := ratelimitotel.New(provider.Meter("github.com/sluicehq/ratelimit"), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return obs, reader
}

func collect(t testing.TB, r *sdkmetric.ManualReader) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

func key(s attribute.Set) string {
	var parts []string
	for _, kv := range s.ToSlice() {
		parts = append(parts, fmt.Sprintf("%s=%q", kv.Key, kv.Value.AsString()))
	}
	return "{" + strings.Join(parts, ",") + "}" // ToSlice is sorted by key
}

// decisions returns the counter's points, `{key_kind=..,outcome=..,rule=..}` → value.
func decisions(t testing.TB, m map[string]metricdata.Metrics) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	d, ok := m[ratelimitotel.DecisionsName]
	if !ok {
		return out
	}
	sum, ok := d.Data.(metricdata.Sum[int64])
	if !ok || !sum.IsMonotonic || sum.Temporality != metricdata.CumulativeTemporality {
		t.Fatalf("%s is %T %+v, want a cumulative monotonic Sum[int64]", d.Name, d.Data, d.Data)
	}
	for _, p := range sum.DataPoints {
		out[key(p.Attributes)] = p.Value
	}
	return out
}

// durations returns the histogram's points, `{rule=..}` → count.
func durations(t testing.TB, m map[string]metricdata.Metrics) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	d, ok := m[ratelimitotel.StoreDurationName]
	if !ok {
		return out
	}
	if d.Unit != "s" {
		t.Errorf("%s unit %q, want s", d.Name, d.Unit)
	}
	for _, p := range d.Data.(metricdata.Histogram[float64]).DataPoints {
		out[key(p.Attributes)] = p.Count
	}
	return out
}

func equal[V comparable](t *testing.T, what string, got, want map[string]V) {
	t.Helper()
	if !maps.Equal(got, want) {
		t.Errorf("%s:\ngot  %v\nwant %v", what, got, want)
	}
}

func TestMiddleware(t *testing.T) {
	obs, reader := newObserver(t)
	clock := ratelimittest.NewClock(time.Time{})
	h := ratelimit.NewRules([]ratelimit.Rule{
		{Name: "per-ip", Limit: ratelimit.PerMinute(3), Key: ratelimit.ByIP(), KeyKind: "ip"},
		{Name: "per-ip-strict", Limit: ratelimit.PerMinute(2), Key: ratelimit.ByIP(), KeyKind: "ip", Shadow: true},
		{Name: "per-key", Limit: ratelimit.PerMinute(100), Key: ratelimit.ByAPIKey("X-API-Key"), KeyKind: "api_key"},
	}, ratelimit.WithClock(clock), ratelimit.WithObserver(obs))(http.NotFoundHandler())

	var codes []int
	for range 5 {
		codes = append(codes, ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/api", "", "X-API-Key", "k1")).Code)
	}
	codes = append(codes, ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/api", "")).Code) // no key
	codes = append(codes, ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/healthz", "")).Code)
	if want := []int{404, 404, 404, 429, 429, 400, 404}; !slices.Equal(codes, want) {
		t.Fatalf("codes %v, want %v", codes, want)
	}

	m := collect(t, reader)
	equal(t, "decisions", decisions(t, m), map[string]int64{
		`{key_kind="ip",outcome="allowed",rule="per-ip"}`:              3,
		`{key_kind="ip",outcome="denied",rule="per-ip"}`:               2,
		`{key_kind="api_key",outcome="allowed",rule="per-key"}`:        5, // its own verdict, though per-ip denied two of these requests
		`{key_kind="ip",outcome="allowed",rule="per-ip-strict"}`:       2,
		`{key_kind="ip",outcome="shadow_denied",rule="per-ip-strict"}`: 3,
		`{key_kind="api_key",outcome="key_error",rule="per-key"}`:      1,
		`{key_kind="",outcome="skipped",rule=""}`:                      1,
	})
	equal(t, "durations", durations(t, m), map[string]uint64{
		`{rule="per-ip"}`:        5,
		`{rule="per-ip-strict"}`: 5,
		`{rule="per-key"}`:       5,
	})
}

func TestCardinalityCap(t *testing.T) {
	obs, reader := newObserver(t, ratelimitotel.WithMaxRules(3))
	for i := range 10 {
		rule := fmt.Sprintf("tenant-%d", i)
		for range i + 1 {
			obs.Observe(ratelimit.Event{Rule: rule, KeyKind: "tenant", Outcome: ratelimit.OutcomeAllowed, Latency: time.Millisecond})
		}
		obs.Observe(ratelimit.Event{Rule: rule, KeyKind: "tenant", Outcome: ratelimit.OutcomeDenied})
	}
	obs.Observe(ratelimit.Event{Rule: "tenant-0", KeyKind: "tenant", Outcome: ratelimit.OutcomeDenied})
	obs.Observe(ratelimit.Event{Rule: "tenant-0", KeyKind: "ip", Outcome: ratelimit.OutcomeAllowed}) // a new pair

	m := collect(t, reader)
	equal(t, "decisions", decisions(t, m), map[string]int64{
		`{key_kind="tenant",outcome="allowed",rule="tenant-0"}`: 1,
		`{key_kind="tenant",outcome="denied",rule="tenant-0"}`:  2,
		`{key_kind="tenant",outcome="allowed",rule="tenant-1"}`: 2,
		`{key_kind="tenant",outcome="denied",rule="tenant-1"}`:  1,
		`{key_kind="tenant",outcome="allowed",rule="tenant-2"}`: 3,
		`{key_kind="tenant",outcome="denied",rule="tenant-2"}`:  1,
		`{key_kind="other",outcome="allowed",rule="other"}`:     4 + 5 + 6 + 7 + 8 + 9 + 10 + 1,
		`{key_kind="other",outcome="denied",rule="other"}`:      7,
	})
	equal(t, "durations", durations(t, m), map[string]uint64{
		`{rule="tenant-0"}`: 1,
		`{rule="tenant-1"}`: 2,
		`{rule="tenant-2"}`: 3,
		`{rule="other"}`:    4 + 5 + 6 + 7 + 8 + 9 + 10,
	})
}

func TestCardinalityCapConcurrent(t *testing.T) {
	const maxRules, workers, names = 50, 8, 400
	obs, reader := newObserver(t, ratelimitotel.WithMaxRules(maxRules))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range names {
				obs.Observe(ratelimit.Event{Rule: fmt.Sprintf("r%d", (i*7+w)%names), KeyKind: "k", Outcome: ratelimit.OutcomeAllowed})
			}
		})
	}
	wg.Wait()
	got := decisions(t, collect(t, reader))
	var total int64
	for _, v := range got {
		total += v
	}
	other := got[`{key_kind="other",outcome="allowed",rule="other"}`]
	if len(got) != maxRules+1 || total != workers*names || other == 0 {
		t.Errorf("%d points (want %d), %d decisions (want %d), %d other", len(got), maxRules+1, total, workers*names, other)
	}
}

func TestOutcomes(t *testing.T) {
	obs, reader := newObserver(t)
	for o := ratelimit.OutcomeAllowed; o <= ratelimit.OutcomeFallback; o++ {
		obs.Observe(ratelimit.Event{Rule: "r", KeyKind: "user", Outcome: o})
	}
	obs.Observe(ratelimit.Event{Rule: "r", KeyKind: "user", Outcome: ratelimit.Outcome(200)})
	want := map[string]int64{}
	for _, name := range []string{"allowed", "denied", "shadow_denied", "skipped", "key_error", "store_error", "fallback", "unknown"} {
		want[fmt.Sprintf(`{key_kind="user",outcome=%q,rule="r"}`, name)] = 1
	}
	equal(t, "decisions", decisions(t, collect(t, reader)), want)
}

func TestLatency(t *testing.T) {
	obs, reader := newObserver(t, ratelimitotel.WithBuckets(0.001, 0.01))
	obs.Observe(ratelimit.Event{Rule: "r", KeyKind: "ip", Outcome: ratelimit.OutcomeAllowed, Latency: 2 * time.Millisecond})
	obs.Observe(ratelimit.Event{Rule: "r", KeyKind: "ip", Outcome: ratelimit.OutcomeDenied, Latency: 20 * time.Millisecond})
	obs.Observe(ratelimit.Event{Rule: "r", KeyKind: "ip", Outcome: ratelimit.OutcomeAllowed})                        // no store call
	obs.Observe(ratelimit.Event{Rule: "r", KeyKind: "ip", Outcome: ratelimit.OutcomeFallback, Latency: time.Second}) // timed by the decision that follows
	obs.Observe(ratelimit.Event{Rule: "q", KeyKind: "ip", Outcome: ratelimit.OutcomeAllowed})

	h := collect(t, reader)[ratelimitotel.StoreDurationName].Data.(metricdata.Histogram[float64])
	if len(h.DataPoints) != 1 {
		t.Fatalf("%d points, want 1 (rule r)", len(h.DataPoints))
	}
	p := h.DataPoints[0]
	if key(p.Attributes) != `{rule="r"}` || p.Count != 2 || p.Sum != 0.022 {
		t.Errorf("%s count %d sum %v, want rule r, 2, 0.022", key(p.Attributes), p.Count, p.Sum)
	}
	if !slices.Equal(p.Bounds, []float64{0.001, 0.01}) || !slices.Equal(p.BucketCounts, []uint64{0, 1, 1}) {
		t.Errorf("bounds %v counts %v, want [0.001 0.01] [0 1 1]", p.Bounds, p.BucketCounts)
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
	obs, reader := newObserver(t)
	clock := ratelimittest.NewClock(time.Time{})
	b := breaker.New(failing{}, breaker.Config{
		Failures: 2, Clock: clock, OnStateChange: obs.BreakerStateChange("redis"),
	})
	state := func() map[string]int64 {
		out := map[string]int64{}
		g := collect(t, reader)[ratelimitotel.BreakerStateName].Data.(metricdata.Gauge[int64])
		for _, p := range g.DataPoints {
			out[key(p.Attributes)] = p.Value
		}
		return out
	}
	equal(t, "new breaker", state(), map[string]int64{`{name="redis"}`: 0})
	req := stores.Request{Rule: "r", Key: "k", Limit: ratelimit.PerSecond(1), Cost: 1}
	b.Take(context.Background(), req)
	b.Take(context.Background(), req)
	equal(t, "after two failures", state(), map[string]int64{`{name="redis"}`: 1})
	obs.BreakerStateChange("replica")(breaker.Open, breaker.HalfOpen)
	equal(t, "two breakers", state(), map[string]int64{`{name="redis"}`: 1, `{name="replica"}`: 2})
}

// brokenMeter fails to create counters.
type brokenMeter struct{ noop.Meter }

func (brokenMeter) Int64Counter(string, ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	return nil, errors.New("boom")
}

func TestNewErrors(t *testing.T) {
	if _, err := ratelimitotel.New(nil); err == nil || !strings.HasPrefix(err.Error(), "ratelimitotel: ") {
		t.Errorf("New(nil) = %v", err)
	}
	if _, err := ratelimitotel.New(brokenMeter{}); err == nil || err.Error() != "ratelimitotel: ratelimit.decisions: boom" {
		t.Errorf("New(broken) = %v", err)
	}
	obs, err := ratelimitotel.New(noop.NewMeterProvider().Meter("x"))
	if err != nil {
		t.Fatal(err)
	}
	obs.Observe(ratelimit.Event{Rule: "r", Outcome: ratelimit.OutcomeAllowed, Latency: time.Millisecond})
}

func TestObserveAllocs(t *testing.T) {
	obs, _ := newObserver(t)
	req := ratelimittest.NewRequest("GET", "/", "")
	e := ratelimit.Event{Rule: "per-ip", KeyKind: "ip", Outcome: ratelimit.OutcomeAllowed, Latency: time.Millisecond, Request: req}
	obs.Observe(e)
	if n := testing.AllocsPerRun(1000, func() { obs.Observe(e) }); n != 0 {
		t.Errorf("Observe allocates %v times, want 0", n)
	}
}

func BenchmarkObserve(b *testing.B) {
	obs, _ := newObserver(b)
	req := ratelimittest.NewRequest("GET", "/", "")
	rules := []string{"global", "per-ip", "tiers-rate", "tiers-quota", "tiers-concurrency"}
	var events []ratelimit.Event
	for _, r := range rules {
		events = append(events,
			ratelimit.Event{Rule: r, KeyKind: "ip", Outcome: ratelimit.OutcomeAllowed, Latency: 40 * time.Microsecond, Request: req},
			ratelimit.Event{Rule: r, KeyKind: "ip", Outcome: ratelimit.OutcomeDenied, Latency: 40 * time.Microsecond, Request: req})
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
