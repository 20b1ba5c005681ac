package ratelimitotel_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/ratelimit"
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

// newFairScheduler is one seat shared by an exempt level "health" and a
// level "api" of one queue of one waiter, flows keyed by X-Tenant.
func newFairScheduler(obs fair.Observer) *fair.Scheduler {
	return fair.New(fair.Config{
		Seats: 1, MaxWait: time.Minute, Observer: obs,
		Levels: []fair.Level{
			{Name: "health", Exempt: true},
			{Name: "api", Shares: 1, Queues: 1, HandSize: 1, QueueLength: 1, Flow: ratelimit.ByHeader("X-Tenant")},
		},
		Classify: func(r *http.Request) string { return strings.TrimPrefix(r.URL.Path, "/") },
	})
}

func tenantRequest(ctx context.Context, path, tenant string) *http.Request {
	r := httptest.NewRequestWithContext(ctx, "GET", path, nil)
	r.Header.Set("X-Tenant", tenant)
	return r
}

// TestFairObserverRecordsEveryOutcomeByLevel drives a real scheduler
// through each outcome: the counter follows, by level and outcome, and the
// wait histogram holds the admitted requests' waits; flows are no
// attribute.
func TestFairObserverRecordsEveryOutcomeByLevel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs, reader := newFairObserver(t)
		s := newFairScheduler(obs)
		ctx := context.Background()

		hold, ok := s.Admit(httptest.NewRecorder(), tenantRequest(ctx, "/api", "a")) // admitted at once
		if !ok {
			t.Fatal("the first request was refused")
		}
		s.Admit(httptest.NewRecorder(), tenantRequest(ctx, "/health", "a")) // exempt
		waited := make(chan func())
		go func() { // waits 40ms for the seat
			done, _ := s.Admit(httptest.NewRecorder(), tenantRequest(ctx, "/api", "b"))
			waited <- done
		}()
		synctest.Wait()
		s.Admit(httptest.NewRecorder(), tenantRequest(ctx, "/api", "b")) // queue full
		time.Sleep(40 * time.Millisecond)
		hold()
		(<-waited)()

		hold, _ = s.Admit(httptest.NewRecorder(), tenantRequest(ctx, "/api", "a"))
		short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
		s.Admit(httptest.NewRecorder(), tenantRequest(short, "/api", "c")) // timed out
		cancel()
		hold()

		m := collect(t, reader)
		equal(t, "decisions", fairDecisions(t, m), map[string]int64{
			`{level="api",outcome="admitted"}`:   3,
			`{level="api",outcome="queue_full"}`: 1,
			`{level="api",outcome="timed_out"}`:  1,
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
	})
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
	s := newFairScheduler(nil)
	reg, err := ratelimitotel.ObserveFairStats(provider.Meter("test"), s)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Unregister()
	done, _ := s.Admit(httptest.NewRecorder(), tenantRequest(context.Background(), "/api", "a"))
	defer done()
	m := collect(t, reader)
	for name, want := range map[string]int64{ratelimitotel.FairSeatsName: 1, ratelimitotel.FairInUseName: 1, ratelimitotel.FairQueuedName: 0} {
		pts := m[name].Data.(metricdata.Gauge[int64]).DataPoints
		if len(pts) != 1 || pts[0].Value != want {
			t.Errorf("%s: %+v, want %d", name, pts, want)
		}
	}
	if _, err := ratelimitotel.ObserveFairStats(nil, s); err == nil {
		t.Error("ObserveFairStats(nil meter) did not fail")
	}
}
