package ratelimitotel

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// outcome is the outcome type of an event: ratelimit.Outcome for an
// Observer, fair.Outcome for a FairObserver.
type outcome interface {
	~uint8
	String() string
}

// series holds the precomputed measurement options of one label set of an
// Observer or a FairObserver, so that recording allocates nothing: the
// decision counter's attributes (the labels and the outcome) for each
// outcome the core defined when this module was built, and the histogram's
// (the first label alone).
type series[O outcome] struct {
	labels []attribute.KeyValue  // the counter's attributes but the outcome
	add    [][]metric.AddOption  // indexed by outcome
	record []metric.RecordOption // the histogram's
}

// newSeries returns the series of labels, precomputing the options of the
// outcomes below known.
func newSeries[O outcome](known int, labels ...attribute.KeyValue) *series[O] {
	s := &series[O]{labels: labels, add: make([][]metric.AddOption, known)}
	for i := range s.add {
		s.add[i] = []metric.AddOption{metric.WithAttributeSet(s.attrs(O(i)))}
	}
	s.record = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(labels[0]))}
	return s
}

func (s *series[O]) attrs(out O) attribute.Set {
	return attribute.NewSet(append(s.labels[:len(s.labels):len(s.labels)], attribute.String("outcome", out.String()))...)
}

// addOptions returns the counter's options for a decision of outcome out.
// Outcomes a newer core may add are recorded too, without precomputed
// attributes.
func (s *series[O]) addOptions(out O) []metric.AddOption {
	if i := int(out); i < len(s.add) {
		return s.add[i]
	}
	return []metric.AddOption{metric.WithAttributeSet(s.attrs(out))}
}

// requestContext is the context of r, for exemplars, or the background
// context for an event without a request.
func requestContext(r *http.Request) context.Context {
	if r != nil {
		return r.Context()
	}
	return context.Background()
}
