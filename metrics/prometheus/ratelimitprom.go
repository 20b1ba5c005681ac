// Package ratelimitprom exports the decisions of a ratelimit.Limiter as
// Prometheus metrics.
//
// An Observer is both a ratelimit.Observer and a prometheus.Collector:
// register it, and pass it to the limiter.
//
//	obs := ratelimitprom.New()
//	prometheus.MustRegister(obs)
//	mw := ratelimit.NewRules(rules, ratelimit.WithObserver(obs))
//
// It exports:
//
//	ratelimit_decisions_total{rule, key_kind, outcome}  counter
//	ratelimit_store_duration_seconds{rule}              histogram
//	ratelimit_breaker_state{name}                       gauge (0 closed, 1 open, 2 half-open)
//
// Labels come only from rule names, key kinds and outcomes, never from keys
// or paths, so the number of series is bounded by the configuration. As a
// guard against rule names generated at run time (one rule per tenant, say),
// at most 1,000 distinct (rule, key_kind) pairs get series of their own (see
// WithMaxRules); decisions of the rest are counted under rule="other",
// key_kind="other".
//
// Events of carved-out or skipped requests have no rule: they are counted
// with outcome="skipped" and empty rule and key_kind labels.
package ratelimitprom

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/breaker"
	"github.com/sluicehq/ratelimit/metrics/labelcap"
)

// DefaultMaxRules is the number of distinct (rule, key_kind) pairs that get
// series of their own unless WithMaxRules says otherwise.
const DefaultMaxRules = labelcap.DefaultMax

// Other is the rule and key_kind label of decisions folded by the cap.
const Other = labelcap.Other

// DefaultBuckets are the bounds, in seconds, of the store duration
// histogram: 50µs to 1s, for memory stores and networked ones alike.
var DefaultBuckets = labelcap.DurationBuckets()

// numOutcomes counts the outcomes ratelimit defines. Outcomes a newer core
// may add are counted too, without a cached child.
const numOutcomes = int(ratelimit.OutcomeFallback) + 1

// Option configures an Observer.
type Option func(*config)

type config = labelcap.Settings

// WithMaxRules sets how many distinct (rule, key_kind) pairs get series of
// their own; DefaultMaxRules unless set. The decisions of further pairs are
// counted under rule="other", key_kind="other". It panics if n < 1.
func WithMaxRules(n int) Option {
	return Option(labelcap.MaxRules("ratelimitprom", n))
}

// WithBuckets sets the bounds, in seconds, of the store duration histogram;
// DefaultBuckets unless set.
func WithBuckets(bounds ...float64) Option {
	return Option(labelcap.Buckets("ratelimitprom", bounds))
}

// Observer counts a limiter's decisions. It implements ratelimit.Observer
// and prometheus.Collector; create one with New and register it once. One
// Observer may serve several limiters (their rules have different names);
// to register several Observers on one registry, wrap each one's registerer
// with prometheus.WrapRegistererWith and a distinguishing label.
//
// Observe is safe for concurrent use and does not allocate once a (rule,
// key_kind, outcome) series exists.
type Observer struct {
	decisions *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	breaker   *prometheus.GaugeVec
	series    *labelcap.Cap[*series[ratelimit.Outcome]] // at most maxRules (rule, key_kind) pairs
}

var (
	_ ratelimit.Observer   = (*Observer)(nil)
	_ prometheus.Collector = (*Observer)(nil)
)

// New returns an Observer. Register it with a prometheus.Registerer before
// the first scrape.
func New(opts ...Option) *Observer {
	c := labelcap.Apply(DefaultBuckets, opts)
	o := &Observer{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ratelimit_decisions_total",
			Help: "Rate limit decisions, by rule, key kind and outcome.",
		}, []string{"rule", "key_kind", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "ratelimit_store_duration_seconds",
			Help:    "Time spent in the limit store per decision, by rule.",
			Buckets: c.Buckets,
		}, []string{"rule"}),
		breaker: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "ratelimit_breaker_state",
			Help: "State of a store circuit breaker: 0 closed, 1 open, 2 half-open.",
		}, []string{"name"}),
	}
	newRuleSeries := func(rule, kind string) *series[ratelimit.Outcome] {
		return newSeries[ratelimit.Outcome](o.decisions, o.duration, numOutcomes, rule, kind)
	}
	o.series = labelcap.New(c.MaxRules, newRuleSeries(Other, Other), newRuleSeries)
	return o
}

// Observe counts e, and records its store latency when it has one. It
// implements ratelimit.Observer.
func (o *Observer) Observe(e ratelimit.Event) {
	s := o.series.Get(e.Rule, e.KeyKind)
	s.counter(e.Outcome).Inc()
	// A Fallback event shares its store call with the decision that
	// follows it: time the call once.
	if e.Latency > 0 && e.Outcome != ratelimit.OutcomeFallback {
		s.histogram().Observe(e.Latency.Seconds())
	}
}

// BreakerStateChange returns a function for breaker.Config's
// OnStateChange that keeps ratelimit_breaker_state{name} up to date: 0
// closed, 1 open, 2 half-open. The gauge starts at 0, as a new Breaker is
// closed. Name each breaker once, from configuration, never per request.
//
//	b := breaker.New(redisStore, breaker.Config{
//		OnStateChange: obs.BreakerStateChange("redis"),
//	})
func (o *Observer) BreakerStateChange(name string) func(from, to breaker.State) {
	g := o.breaker.WithLabelValues(name)
	g.Set(float64(breaker.Closed))
	return func(_, to breaker.State) { g.Set(float64(to)) }
}

// Describe sends the descriptors of the Observer's metrics. It implements
// prometheus.Collector.
func (o *Observer) Describe(ch chan<- *prometheus.Desc) {
	o.decisions.Describe(ch)
	o.duration.Describe(ch)
	o.breaker.Describe(ch)
}

// Collect sends the Observer's metrics. It implements prometheus.Collector.
func (o *Observer) Collect(ch chan<- prometheus.Metric) {
	o.decisions.Collect(ch)
	o.duration.Collect(ch)
	o.breaker.Collect(ch)
}
