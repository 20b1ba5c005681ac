package ratelimitotel

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/sluicehq/ratelimit"
)

// The names of the adaptive-rule instruments.
const (
	AdaptiveLimitName     = "ratelimit.adaptive.limit"
	AdaptiveInFlightName  = "ratelimit.adaptive.in_flight"
	AdaptiveMinRTTName    = "ratelimit.adaptive.min_rtt"
	AdaptiveSampleRTTName = "ratelimit.adaptive.sample_rtt"
)

// ObserveAdaptive registers observable gauges of the state of the adaptive
// rules named rules of l, read at each collection, with a "rule"
// attribute: the limit, the requests in flight, the minimum RTT and the
// last window's latency (seconds). Keys are never attributes: for a keyed
// rule, limit and in-flight are summed over its keys and the RTTs are the
// highest of its keys. Unregister the returned registration to stop.
func ObserveAdaptive(meter metric.Meter, l *ratelimit.Limiter, rules ...string) (metric.Registration, error) {
	if meter == nil || l == nil {
		return nil, errors.New("ratelimitotel: ObserveAdaptive needs a meter and a limiter")
	}
	limit, err := meter.Int64ObservableGauge(AdaptiveLimitName, metric.WithDescription("Requests in flight an adaptive rule allows now."), metric.WithUnit("{request}"))
	if err != nil {
		return nil, fmt.Errorf("ratelimitotel: %s: %w", AdaptiveLimitName, err)
	}
	inFlight, err := meter.Int64ObservableGauge(AdaptiveInFlightName, metric.WithDescription("Requests in flight under an adaptive rule."), metric.WithUnit("{request}"))
	if err != nil {
		return nil, fmt.Errorf("ratelimitotel: %s: %w", AdaptiveInFlightName, err)
	}
	minRTT, err := meter.Float64ObservableGauge(AdaptiveMinRTTName, metric.WithDescription("The minimum RTT an adaptive rule compares latency with."), metric.WithUnit("s"))
	if err != nil {
		return nil, fmt.Errorf("ratelimitotel: %s: %w", AdaptiveMinRTTName, err)
	}
	sample, err := meter.Float64ObservableGauge(AdaptiveSampleRTTName, metric.WithDescription("The latency of an adaptive rule's last sample window."), metric.WithUnit("s"))
	if err != nil {
		return nil, fmt.Errorf("ratelimitotel: %s: %w", AdaptiveSampleRTTName, err)
	}
	rules = append([]string(nil), rules...)
	return meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for _, rule := range rules {
			states := l.Adaptive(rule)
			if states == nil {
				continue
			}
			var lim, n int64
			var rtt, last time.Duration
			for _, s := range states {
				lim, n = lim+int64(s.Limit), n+int64(s.InFlight)
				rtt, last = max(rtt, s.MinRTT), max(last, s.SampleRTT)
			}
			attrs := metric.WithAttributeSet(attribute.NewSet(attribute.String("rule", rule)))
			o.ObserveInt64(limit, lim, attrs)
			o.ObserveInt64(inFlight, n, attrs)
			o.ObserveFloat64(minRTT, rtt.Seconds(), attrs)
			o.ObserveFloat64(sample, last.Seconds(), attrs)
		}
		return nil
	}, limit, inFlight, minRTT, sample)
}
