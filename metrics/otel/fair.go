package ratelimitotel

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/sluicehq/ratelimit/fair"
	"github.com/sluicehq/ratelimit/metrics/labelcap"
)

// The names of the fair-queuing instruments.
const (
	FairDecisionsName = "ratelimit.fair.decisions"
	FairWaitName      = "ratelimit.fair.wait"
	FairSeatsName     = "ratelimit.fair.seats"
	FairInUseName     = "ratelimit.fair.seats.in_use"
	FairQueuedName    = "ratelimit.fair.queued"
)

// DefaultWaitBuckets are the bounds, in seconds, advised for the
// fair-queuing wait histogram: 1 ms to 10 s, the range of MaxWait.
var DefaultWaitBuckets = labelcap.WaitBuckets()

// numFairOutcomes counts the outcomes package fair defines. Outcomes a
// newer core may add are recorded too, without precomputed attributes.
const numFairOutcomes = int(fair.Canceled) + 1

// FairObserver records the decisions of a fair.Scheduler. It implements
// fair.Observer; create one with NewFairObserver and set it as the
// scheduler's Config.Observer. It records:
//
//	ratelimit.fair.decisions  Int64Counter      {decision}  attributes level, outcome
//	ratelimit.fair.wait       Float64Histogram  s           attribute level: the queue wait of admitted requests (0 when uncontended)
//
// Levels are attributes, flows never are. As a guard against level names
// generated at run time, at most WithMaxRules distinct levels (1,000 by
// default) get attributes of their own; the rest are recorded with
// level="other". ObserveFair is safe for concurrent use and does not
// allocate.
type FairObserver struct {
	decisions metric.Int64Counter
	wait      metric.Float64Histogram
	levels    *labelcap.Cap[*series[fair.Outcome]]
}

var _ fair.Observer = (*FairObserver)(nil)

// NewFairObserver returns a FairObserver whose instruments are created with
// meter. WithMaxRules caps the distinct levels; WithBuckets sets the wait
// histogram's advised bounds (DefaultWaitBuckets unless set).
func NewFairObserver(meter metric.Meter, opts ...Option) (*FairObserver, error) {
	if meter == nil {
		return nil, errors.New("ratelimitotel: NewFairObserver(nil meter)")
	}
	c := labelcap.Apply(DefaultWaitBuckets, opts)
	decisions, err := meter.Int64Counter(FairDecisionsName,
		metric.WithDescription("Fair-queuing decisions, by level and outcome."),
		metric.WithUnit("{decision}"))
	if err != nil {
		return nil, fmt.Errorf("ratelimitotel: %s: %w", FairDecisionsName, err)
	}
	wait, err := meter.Float64Histogram(FairWaitName,
		metric.WithDescription("Time admitted requests waited for a seat, by level."),
		metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(c.Buckets...))
	if err != nil {
		return nil, fmt.Errorf("ratelimitotel: %s: %w", FairWaitName, err)
	}
	return &FairObserver{decisions: decisions, wait: wait,
		levels: labelcap.New(c.MaxRules, newLevelSeries(Other, ""), newLevelSeries)}, nil
}

// newLevelSeries returns the series of a level (the Cap's key kind is
// unused).
func newLevelSeries(level, _ string) *series[fair.Outcome] {
	return newSeries[fair.Outcome](numFairOutcomes, attribute.String("level", level))
}

// ObserveFair records e. It implements fair.Observer.
func (o *FairObserver) ObserveFair(e fair.Event) {
	ctx := requestContext(e.Request)
	s := o.levels.Get(e.Level, "")
	o.decisions.Add(ctx, 1, s.addOptions(e.Outcome)...)
	if e.Outcome == fair.Admitted {
		o.wait.Record(ctx, e.Wait.Seconds(), s.record...)
	}
}

// ObserveFairStats registers observable gauges of the state of s, read at
// each collection: its seats, the seats in use and the requests waiting.
// Unregister the returned registration to stop.
func ObserveFairStats(meter metric.Meter, s *fair.Scheduler) (metric.Registration, error) {
	if meter == nil || s == nil {
		return nil, errors.New("ratelimitotel: ObserveFairStats needs a meter and a scheduler")
	}
	var gauges [3]metric.Int64ObservableGauge
	for i, g := range []struct{ name, desc string }{
		{FairSeatsName, "Requests a fair scheduler serves at once."},
		{FairInUseName, "Seats of a fair scheduler taken."},
		{FairQueuedName, "Requests waiting for a seat of a fair scheduler."},
	} {
		var err error
		gauges[i], err = meter.Int64ObservableGauge(g.name, metric.WithDescription(g.desc), metric.WithUnit("{request}"))
		if err != nil {
			return nil, fmt.Errorf("ratelimitotel: %s: %w", g.name, err)
		}
	}
	return meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := s.Stats()
		o.ObserveInt64(gauges[0], int64(st.Seats))
		o.ObserveInt64(gauges[1], int64(st.InUse))
		o.ObserveInt64(gauges[2], int64(st.Queued))
		return nil
	}, gauges[0], gauges[1], gauges[2])
}
