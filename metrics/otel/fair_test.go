package ratelimitotel_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit/fair"
	ratelimitotel "github.com/sluicehq/ratelimit/metrics/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// newFairObserver returns a FairObserver on a fresh SDK with a ManualReader.
func newFairObserver(t testing.TB, opts ...ratelimitotel.Option) (*ratelimitotel.FairObserver, *sdkmetric.ManualReader) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { provider.Shutdown(context.Background()) })
	obs, err := ratelimitotel.NewFairObserver(provider.Meter("github.com/sluicehq/ratelimit"), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return obs, reader
}

// fairDecisions returns the counter's points, `{level=..,outcome=..}` → value.
func fairDecisions(t testing.TB, m map[string]metricdata.Metrics) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, p := range m[ratelimitotel.FairDecisionsName].Data.(metricdata.Sum[int64]).DataPoints {
		out[key(p.Attributes)] = p.Value
	}
	return out
}

// TestFairObserverRecordsEveryOutcomeByLevel: the counter follows the
// events by level and outcome, the wait histogram holds the admitted
// requests' waits, and flows and queues are no attribute. (The Prometheus
// module's test drives a real scheduler through the same outcomes.)
func TestFairObserverRecordsEveryOutcomeByLevel(t *testing.T) {
	obs, reader := newFairObserver(t)
	for _, e := range []fair.Event{
		{Level: "api", Outcome: fair.Admitted, Queue: -1},
		{Level: "health", Outcome: fair.Exempt, Queue: -1},
		{Level: "api", Outcome: fair.Admitted, Flow: "b", Queue: 0, Wait: 40 * time.Millisecond},
		{Level: "api", Outcome: fair.QueueFull, Flow: "b", Queue: 0, RetryAfter: time.Second},
		{Level: "api", Outcome: fair.TimedOut, Flow: "c", Queue: 0, Wait: 10 * time.Millisecond},
		{Level: "api", Outcome: fair.Canceled, Flow: "d", Queue: 1, Wait: time.Millisecond},
		{Level: "api", Outcome: fair.Admitted, Flow: "a", Queue: 1, Request: httptest.NewRequest("GET", "/", nil)},
	} {
		obs.ObserveFair(e)
	}
	m := collect(t, reader)
	equal(t, "decisions", fairDecisions(t, m), map[string]int64{
		`{level="api",outcome="admitted"}`:   3,
		`{level="api",outcome="queue_full"}`: 1,
		`{level="api",outcome="timed_out"}`:  1,
		`{level="api",outcome="canceled"}`:   1,
		`{level="health",outcome="exempt"}`:  1,
	})
	w := m[ratelimitotel.FairWaitName]
	if w.Unit != "s" {
		t.Errorf("%s unit %q, want s", w.Name, w.Unit)
	}
	pts := w.Data.(metricdata.Histogram[float64]).DataPoints
	if len(pts) != 1 || key(pts[0].Attributes) != `{level="api"}` || pts[0].Count != 3 || pts[0].Sum != 0.04 {
		t.Errorf("wait histogram %+v, want one point {level=api} of 3 waits summing to 0.04s", pts)
	}
}

// TestFairObserverCapsLevels: level names beyond WithMaxRules share
// level="other".
func TestFairObserverCapsLevels(t *testing.T) {
	obs, reader := newFairObserver(t, ratelimitotel.WithMaxRules(2))
	for i := range 50 {
		obs.ObserveFair(fair.Event{Level: "level-" + strings.Repeat("x", i), Outcome: fair.Admitted, Queue: -1})
	}
	got := fairDecisions(t, collect(t, reader))
	if len(got) != 3 || got[`{level="other",outcome="admitted"}`] != 48 {
		t.Errorf("points %v, want 2 levels of their own and 48 decisions under other", got)
	}
}

func TestFairObserverDoesNotAllocate(t *testing.T) {
	obs, _ := newFairObserver(t)
	e := fair.Event{Level: "api", Outcome: fair.QueueFull, Queue: 3, Flow: "tenant-1"}
	obs.ObserveFair(e)
	if n := testing.AllocsPerRun(100, func() { obs.ObserveFair(e) }); n != 0 {
		t.Errorf("%v allocations per event, want 0", n)
	}
}

func TestObserveFairStatsReportsSeats(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())
	s := fair.New(fair.Config{Seats: 3, Levels: []fair.Level{{Name: "api", Shares: 1}}})
	reg, err := ratelimitotel.ObserveFairStats(provider.Meter("test"), s)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Unregister()
	done, _ := s.Admit(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	defer done()
	m := collect(t, reader)
	for name, want := range map[string]int64{ratelimitotel.FairSeatsName: 3, ratelimitotel.FairInUseName: 1, ratelimitotel.FairQueuedName: 0} {
		pts := m[name].Data.(metricdata.Gauge[int64]).DataPoints
		if len(pts) != 1 || pts[0].Value != want {
			t.Errorf("%s: %+v, want %d", name, pts, want)
		}
	}
	if _, err := ratelimitotel.ObserveFairStats(nil, s); err == nil {
		t.Error("ObserveFairStats(nil meter) did not fail")
	}
}
