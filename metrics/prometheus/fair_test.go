package ratelimitprom_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/fair"
	ratelimitprom "github.com/sluicehq/ratelimit/metrics/prometheus"
)

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

// TestFairObserverCountsEveryOutcomeByLevel drives a real scheduler through
// each outcome: the counters follow, by level and outcome; the wait
// histogram holds the admitted requests' waits; flows are no label.
func TestFairObserverCountsEveryOutcomeByLevel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs := ratelimitprom.NewFairObserver()
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

		mfs := gather(t, obs)
		equal(t, "decisions", series(mfs["ratelimit_fair_decisions_total"]), map[string]float64{
			`{level="api",outcome="admitted"}`:   3,
			`{level="api",outcome="queue_full"}`: 1,
			`{level="api",outcome="timed_out"}`:  1,
			`{level="health",outcome="exempt"}`:  1,
		})
		h := mfs["ratelimit_fair_wait_seconds"].GetMetric()
		if len(h) != 1 || h[0].GetHistogram().GetSampleCount() != 3 {
			t.Fatalf("wait histogram %v, want one series of 3 waits", h)
		}
		if sum := h[0].GetHistogram().GetSampleSum(); sum != 0.04 {
			t.Errorf("waits sum to %vs, want 0.04 (one wait of 40ms, two of 0)", sum)
		}
		for name, mf := range mfs { // flows are never labels
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if n := l.GetName(); n != "level" && n != "outcome" || strings.Contains("abc", l.GetValue()) {
						t.Errorf("%s has the label %s=%q", name, n, l.GetValue())
					}
				}
			}
		}
	})
}

// TestFairObserverCapsLevels: level names beyond WithMaxRules share
// level="other", so generated names cannot grow the series without bound.
func TestFairObserverCapsLevels(t *testing.T) {
	obs := ratelimitprom.NewFairObserver(ratelimitprom.WithMaxRules(2))
	for i := range 50 {
		obs.ObserveFair(fair.Event{Level: "level-" + strings.Repeat("x", i), Outcome: fair.Admitted, Queue: -1})
	}
	got := series(gather(t, obs)["ratelimit_fair_decisions_total"])
	if len(got) != 3 || got[`{level="other",outcome="admitted"}`] != 48 {
		t.Errorf("series %v, want 2 levels of their own and 48 decisions under other", got)
	}
}

// TestFairObserverDoesNotAllocate once a level's series exist.
func TestFairObserverDoesNotAllocate(t *testing.T) {
	obs := ratelimitprom.NewFairObserver()
	e := fair.Event{Level: "api", Outcome: fair.Admitted, Queue: 3, Wait: time.Millisecond, Flow: "tenant-1"}
	obs.ObserveFair(e)
	if n := testing.AllocsPerRun(100, func() { obs.ObserveFair(e) }); n != 0 {
		t.Errorf("%v allocations per event, want 0", n)
	}
}

// TestFairStatsCollectorExportsSeats reads the scheduler at each scrape.
func TestFairStatsCollectorExportsSeats(t *testing.T) {
	s := newFairScheduler(nil)
	stats := ratelimitprom.FairStatsCollector(s)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(stats)
	done, _ := s.Admit(httptest.NewRecorder(), tenantRequest(context.Background(), "/api", "a"))
	want := `
# HELP ratelimit_fair_seats_in_use Seats of a fair scheduler taken.
# TYPE ratelimit_fair_seats_in_use gauge
ratelimit_fair_seats_in_use 1
# HELP ratelimit_fair_seats Requests a fair scheduler serves at once.
# TYPE ratelimit_fair_seats gauge
ratelimit_fair_seats 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "ratelimit_fair_seats", "ratelimit_fair_seats_in_use"); err != nil {
		t.Fatal(err)
	}
	done()
	if got := series(gather(t, stats)["ratelimit_fair_seats_in_use"]); got["{}"] != 0 {
		t.Errorf("after done: %v, want 0 in use", got)
	}
}
