// Package ratelimitotel records the decisions of a ratelimit.Limiter with
// OpenTelemetry metrics.
//
//	obs, err := ratelimitotel.New(otel.Meter("github.com/sluicehq/ratelimit"))
//	if err != nil { ... }
//	mw := ratelimit.NewRules(rules, ratelimit.WithObserver(obs))
//
// It records:
//
//	ratelimit.decisions       Int64Counter      {1}  attributes rule, key_kind, outcome
//	ratelimit.store.duration  Float64Histogram  s    attribute rule
//	ratelimit.breaker.state   Int64Gauge        {state}  attribute name (0 closed, 1 open, 2 half-open)
//
// Attributes come only from rule names, key kinds and outcomes, never from
// keys or paths. As a guard against rule names generated at run time, at
// most 1,000 distinct (rule, key_kind) pairs get attributes of their own (see
// WithMaxRules); decisions of the rest are recorded with rule="other",
// key_kind="other". Store durations are recorded only for events that carry
// a latency.
//
// Events of carved-out or skipped requests have no rule: they are recorded
// with outcome="skipped" and empty rule and key_kind.
package ratelimitotel

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/breaker"
	"github.com/sluicehq/ratelimit/metrics/labelcap"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// DefaultMaxRules is the number of distinct (rule, key_kind) pairs that get
// attributes of their own unless WithMaxRules says otherwise.
const DefaultMaxRules = labelcap.DefaultMax

// Other is the rule and key_kind attribute of decisions folded by the cap.
const Other = labelcap.Other

// DefaultBuckets are the bounds, in seconds, of the store duration
// histogram: 50µs to 1s. (The SDK's own default bounds suit milliseconds.)
var DefaultBuckets = labelcap.DurationBuckets()

// The instrument names.
const (
	DecisionsName     = "ratelimit.decisions"
	StoreDurationName = "ratelimit.store.duration"
	BreakerStateName  = "ratelimit.breaker.state"
)

// numOutcomes counts the outcomes ratelimit defines. Outcomes a newer core
// may add are recorded too, without precomputed attributes.
const numOutcomes = int(ratelimit.OutcomeFallback) + 1

// Option configures an Observer.
type Option func(*config)

type config = labelcap.Settings

// WithMaxRules sets how many distinct (rule, key_kind) pairs get attributes
// of their own; DefaultMaxRules unless set. The decisions of further pairs
// are recorded with rule="other", key_kind="other". It panics if n < 1.
func WithMaxRules(n int) Option {
	return Option(labelcap.MaxRules("ratelimitotel", n))
}

// WithBuckets sets the bucket bounds, in seconds, advised for the store
// duration histogram; DefaultBuckets unless set. A View configured in the
// SDK takes precedence.
func WithBuckets(bounds ...float64) Option {
	return Option(labelcap.Buckets("ratelimitotel", bounds))
}

// Observer records a limiter's decisions with OpenTelemetry instruments. It
// implements ratelimit.Observer; create one with New. One Observer may serve
// several limiters. Observe is safe for concurrent use.
type Observer struct {
	decisions metric.Int64Counter
	duration  metric.Float64Histogram
	breaker   metric.Int64Gauge
	series    *labelcap.Cap[*series[ratelimit.Outcome]] // at most maxRules (rule, key_kind) pairs
}

var _ ratelimit.Observer = (*Observer)(nil)

// New returns an Observer whose instruments are created with meter, such as
// otel.Meter("github.com/sluicehq/ratelimit") or a MeterProvider's Meter.
func New(meter metric.Meter, opts ...Option) (*Observer, error) {
	if meter == nil {
		return nil, errors.New("ratelimitotel: New(nil meter)")
	}
	c := labelcap.Apply(DefaultBuckets, opts)
	decisions, err := meter.Int64Counter(DecisionsName,
		metric.WithDescription("Rate limit decisions, by rule, key kind and outcome."),
		metric.WithUnit("{decision}"))
	if err != nil {
		return nil, fmt.Errorf("ratelimitotel: %s: %w", DecisionsName, err)
	}
	duration, err := meter.Float64Histogram(StoreDurationName,
		metric.WithDescription("Time spent in the limit store per decision, by rule."),
		metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(c.Buckets...))
	if err != nil {
		return nil, fmt.Errorf("ratelimitotel: %s: %w", StoreDurationName, err)
	}
	breaker, err := meter.Int64Gauge(BreakerStateName,
		metric.WithDescription("State of a store circuit breaker: 0 closed, 1 open, 2 half-open."),
		metric.WithUnit("{state}"))
	if err != nil {
		return nil, fmt.Errorf("ratelimitotel: %s: %w", BreakerStateName, err)
	}
	o := &Observer{decisions: decisions, duration: duration, breaker: breaker,
		series: labelcap.New(c.MaxRules, newRuleSeries(Other, Other), newRuleSeries)}
	return o, nil
}

// newRuleSeries returns the series of a (rule, key_kind) pair; its store
// durations are recorded by rule.
func newRuleSeries(rule, kind string) *series[ratelimit.Outcome] {
	return newSeries[ratelimit.Outcome](numOutcomes, attribute.String("rule", rule), attribute.String("key_kind", kind))
}

// Observe records e. It implements ratelimit.Observer.
func (o *Observer) Observe(e ratelimit.Event) {
	ctx := requestContext(e.Request)
	s := o.series.Get(e.Rule, e.KeyKind)
	o.decisions.Add(ctx, 1, s.addOptions(e.Outcome)...)
	// A Fallback event shares its store call with the decision that
	// follows it: time the call once.
	if e.Latency > 0 && e.Outcome != ratelimit.OutcomeFallback {
		o.duration.Record(ctx, e.Latency.Seconds(), s.record...)
	}
}

// BreakerStateChange returns a function for breaker.Config's
// OnStateChange that records ratelimit.breaker.state{name}: 0 closed, 1
// open, 2 half-open. It records 0 at once, as a new Breaker is closed. Name
// each breaker once, from configuration, never per request.
func (o *Observer) BreakerStateChange(name string) func(from, to breaker.State) {
	opt := metric.WithAttributeSet(attribute.NewSet(attribute.String("name", name)))
	o.breaker.Record(context.Background(), int64(breaker.Closed), opt)
	return func(_, to breaker.State) {
		o.breaker.Record(context.Background(), int64(to), opt)
	}
}
