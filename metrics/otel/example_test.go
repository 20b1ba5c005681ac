package ratelimitotel_test

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/sluicehq/ratelimit"
	ratelimitotel "github.com/sluicehq/ratelimit/metrics/otel"
	"github.com/sluicehq/ratelimit/ratelimittest"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

func Example() {
	// In production: an OTLP or Prometheus exporter's reader, and usually
	// otel.SetMeterProvider(provider) plus otel.Meter(...).
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())

	obs, err := ratelimitotel.New(provider.Meter("github.com/sluicehq/ratelimit"))
	if err != nil {
		panic(err)
	}
	h := ratelimit.New(ratelimit.PerMinute(2), ratelimit.ByIP(),
		ratelimit.WithName("per-ip"),
		ratelimit.WithObserver(obs),
		ratelimit.WithClock(ratelimittest.NewClock(time.Time{})), // for a deterministic example
	)(http.NotFoundHandler())
	for range 3 {
		ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", ""))
	}

	var rm metricdata.ResourceMetrics
	reader.Collect(context.Background(), &rm)
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if sum, ok := m.Data.(metricdata.Sum[int64]); ok {
			for _, p := range sum.DataPoints {
				outcome, _ := p.Attributes.Value("outcome")
				rule, _ := p.Attributes.Value("rule")
				fmt.Printf("%s rule=%s outcome=%s: %d\n", m.Name, rule.AsString(), outcome.AsString(), p.Value)
			}
		}
	}
	// Unordered output:
	// ratelimit.decisions rule=per-ip outcome=allowed: 2
	// ratelimit.decisions rule=per-ip outcome=denied: 1
}
