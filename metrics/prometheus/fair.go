package ratelimitprom

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sluicehq/ratelimit/fair"
	"github.com/sluicehq/ratelimit/metrics/labelcap"
)

// DefaultWaitBuckets are the bounds, in seconds, of the fair-queuing wait
// histogram: 1 ms to 10 s, the range of MaxWait.
var DefaultWaitBuckets = labelcap.WaitBuckets()

// numFairOutcomes counts the outcomes package fair defines. Outcomes a
// newer core may add are counted too, without a cached child.
const numFairOutcomes = int(fair.Canceled) + 1

// FairObserver counts the decisions of a fair.Scheduler. It implements
// fair.Observer and prometheus.Collector; create one with NewFairObserver,
// register it, and set it as the scheduler's Config.Observer:
//
//	obs := ratelimitprom.NewFairObserver()
//	prometheus.MustRegister(obs)
//	cfg.Observer = obs
//
// It exports:
//
//	ratelimit_fair_decisions_total{level, outcome}  counter
//	ratelimit_fair_wait_seconds{level}              histogram: the queue wait of admitted requests (0 when uncontended)
//
// Levels are labels, flows never are: the number of series is bounded by
// the levels configured. As a guard against level names generated at run
// time, at most WithMaxRules distinct levels (1,000 by default) get series
// of their own; the decisions of the rest are counted under level="other".
// ObserveFair is safe for concurrent use and does not allocate once a
// (level, outcome) series exists.
type FairObserver struct {
	decisions *prometheus.CounterVec
	wait      *prometheus.HistogramVec
	levels    *labelcap.Cap[*series[fair.Outcome]]
}

var (
	_ fair.Observer        = (*FairObserver)(nil)
	_ prometheus.Collector = (*FairObserver)(nil)
)

// NewFairObserver returns a FairObserver. WithMaxRules caps the distinct
// levels; WithBuckets sets the wait histogram's bounds (DefaultWaitBuckets
// unless set).
func NewFairObserver(opts ...Option) *FairObserver {
	c := labelcap.Apply(DefaultWaitBuckets, opts)
	o := &FairObserver{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ratelimit_fair_decisions_total",
			Help: "Fair-queuing decisions, by level and outcome.",
		}, []string{"level", "outcome"}),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "ratelimit_fair_wait_seconds",
			Help:    "Time admitted requests waited for a seat, by level.",
			Buckets: c.Buckets,
		}, []string{"level"}),
	}
	newLevelSeries := func(level, _ string) *series[fair.Outcome] { // the Cap's key kind is unused
		return newSeries[fair.Outcome](o.decisions, o.wait, numFairOutcomes, level)
	}
	o.levels = labelcap.New(c.MaxRules, newLevelSeries(Other, ""), newLevelSeries)
	return o
}

// ObserveFair counts e and records the wait of an admitted request. It
// implements fair.Observer.
func (o *FairObserver) ObserveFair(e fair.Event) {
	s := o.levels.Get(e.Level, "")
	s.counter(e.Outcome).Inc()
	if e.Outcome == fair.Admitted {
		s.histogram().Observe(e.Wait.Seconds())
	}
}

// Describe implements prometheus.Collector.
func (o *FairObserver) Describe(ch chan<- *prometheus.Desc) {
	o.decisions.Describe(ch)
	o.wait.Describe(ch)
}

// Collect implements prometheus.Collector.
func (o *FairObserver) Collect(ch chan<- prometheus.Metric) {
	o.decisions.Collect(ch)
	o.wait.Collect(ch)
}

// FairStatsCollector exports the state of s, read at each scrape:
//
//	ratelimit_fair_seats          gauge: requests served at once
//	ratelimit_fair_seats_in_use   gauge
//	ratelimit_fair_queued         gauge: requests waiting for a seat
//
// To export several schedulers on one registry, wrap each one's registerer
// with prometheus.WrapRegistererWith and a distinguishing label.
func FairStatsCollector(s *fair.Scheduler) prometheus.Collector {
	if s == nil {
		panic("ratelimitprom: FairStatsCollector(nil)")
	}
	return &fairStats{s: s,
		seats:  prometheus.NewDesc("ratelimit_fair_seats", "Requests a fair scheduler serves at once.", nil, nil),
		inUse:  prometheus.NewDesc("ratelimit_fair_seats_in_use", "Seats of a fair scheduler taken.", nil, nil),
		queued: prometheus.NewDesc("ratelimit_fair_queued", "Requests waiting for a seat of a fair scheduler.", nil, nil),
	}
}

type fairStats struct {
	s                    *fair.Scheduler
	seats, inUse, queued *prometheus.Desc
}

func (c *fairStats) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.seats
	ch <- c.inUse
	ch <- c.queued
}

func (c *fairStats) Collect(ch chan<- prometheus.Metric) {
	st := c.s.Stats()
	ch <- prometheus.MustNewConstMetric(c.seats, prometheus.GaugeValue, float64(st.Seats))
	ch <- prometheus.MustNewConstMetric(c.inUse, prometheus.GaugeValue, float64(st.InUse))
	ch <- prometheus.MustNewConstMetric(c.queued, prometheus.GaugeValue, float64(st.Queued))
}
