package ratelimitotel_test

import (
	"context"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sluicehq/ratelimit"
	ratelimitotel "github.com/sluicehq/ratelimit/metrics/otel"
	"github.com/sluicehq/ratelimit/ratelimittest"
)

// TestObserveAdaptiveReportsState: the gauges follow the limiter's state,
// and unknown rules report nothing.
func TestObserveAdaptiveReportsState(t *testing.T) {
	lim := ratelimit.NewRulesLimiter([]ratelimit.Rule{
		{Name: "inflight", Key: ratelimit.Global(), Adaptive: &ratelimit.Adaptive{Min: 9, Max: 9, Initial: 9}},
	})
	reader := sdkmetric.NewManualReader()
	meter := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("test")
	reg, err := ratelimitotel.ObserveAdaptive(meter, lim, "inflight", "no-such-rule")
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Unregister()
	done, ok := lim.Admit(ratelimittest.NewDiscardWriter(), ratelimittest.NewRequest("GET", "/", ""))
	if !ok {
		t.Fatal("rejected")
	}
	defer done()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	points := 0
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					rule, _ := p.Attributes.Value("rule")
					if rule.AsString() != "inflight" {
						t.Errorf("%s: rule %q", m.Name, rule.AsString())
					}
					got[m.Name] = p.Value
					points++
				}
			case metricdata.Gauge[float64]:
				points += len(d.DataPoints)
			}
		}
	}
	if got[ratelimitotel.AdaptiveLimitName] != 9 || got[ratelimitotel.AdaptiveInFlightName] != 1 || points != 4 {
		t.Fatalf("gauges %v, %d points; want limit 9, in flight 1, 4 points", got, points)
	}
}
