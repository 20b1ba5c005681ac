package ratelimitotel_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/adaptive"
	ratelimitotel "github.com/sluicehq/ratelimit/metrics/otel"
	"github.com/sluicehq/ratelimit/ratelimittest"
)

// TestObserveAdaptiveReportsState: the gauges follow the limiter's state,
// and unknown rules report nothing.
func TestObserveAdaptiveReportsState(t *testing.T) {
	lim := ratelimit.NewRulesLimiter([]ratelimit.Rule{
		{Name: "inflight", Key: ratelimit.Global(), Adaptive: &adaptive.Config{Min: 9, Max: 9, Initial: 9}},
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

// TestObserveAdaptiveReportsRTTs: once windows have closed, the minimum
// RTT and the sample RTT are those of the limiter's state, in seconds.
func TestObserveAdaptiveReportsRTTs(t *testing.T) {
	clock := ratelimittest.NewClock(time.Time{})
	lim := ratelimit.NewRulesLimiter([]ratelimit.Rule{{Name: "inflight", Key: ratelimit.Global(), Adaptive: &adaptive.Config{}}}, ratelimit.WithClock(clock))
	reader := sdkmetric.NewManualReader()
	reg, err := ratelimitotel.ObserveAdaptive(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("test"), lim, "inflight")
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Unregister()
	// Sequential requests of 5 ms: a window closes every 100 ms.
	h := lim.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { clock.Advance(5 * time.Millisecond) }))
	for range 61 {
		ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", ""))
	}
	st := lim.Adaptive("inflight")[0]
	if st.MinRTT < 4*time.Millisecond || st.MinRTT > 6*time.Millisecond || st.SampleRTT == 0 {
		t.Fatalf("state %+v: want a minimum RTT of about 5ms", st)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if g, ok := m.Data.(metricdata.Gauge[float64]); ok && len(g.DataPoints) == 1 {
				got[m.Name] = g.DataPoints[0].Value
			}
		}
	}
	if got[ratelimitotel.AdaptiveMinRTTName] != st.MinRTT.Seconds() || got[ratelimitotel.AdaptiveSampleRTTName] != st.SampleRTT.Seconds() {
		t.Fatalf("reported %v; state MinRTT %v, SampleRTT %v", got, st.MinRTT, st.SampleRTT)
	}
}
