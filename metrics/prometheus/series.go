package ratelimitprom

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// outcome is the outcome type of an event: ratelimit.Outcome for an
// Observer, fair.Outcome for a FairObserver.
type outcome interface {
	~uint8
	String() string
}

// series holds the pre-resolved metrics of one label set of an Observer or
// a FairObserver: a child of the decision counter for each outcome the
// core defined when this module was built, and one of the histogram (by
// the first label alone), each taken from its vector on first use, so
// that recording then allocates nothing.
type series[O outcome] struct {
	counterVec   *prometheus.CounterVec
	histogramVec *prometheus.HistogramVec
	labels       []string                             // the counter's label values but the outcome
	counters     []atomic.Pointer[prometheus.Counter] // indexed by outcome
	hist         atomic.Pointer[prometheus.Observer]
}

// newSeries returns the series of labels in counters and histograms,
// caching the counters of the outcomes below known.
func newSeries[O outcome](counters *prometheus.CounterVec, histograms *prometheus.HistogramVec, known int, labels ...string) *series[O] {
	return &series[O]{counterVec: counters, histogramVec: histograms, labels: labels,
		counters: make([]atomic.Pointer[prometheus.Counter], known)}
}

// counter returns the decision counter of outcome out. Outcomes a newer
// core may add are counted too, without a cached child.
func (s *series[O]) counter(out O) prometheus.Counter {
	i := int(out)
	if i >= len(s.counters) {
		return s.counterVec.WithLabelValues(s.labelValues(out)...)
	}
	if c := s.counters[i].Load(); c != nil {
		return *c
	}
	// Racing callers get the same child from the vector.
	c := s.counterVec.WithLabelValues(s.labelValues(out)...)
	s.counters[i].Store(&c)
	return c
}

func (s *series[O]) labelValues(out O) []string {
	return append(s.labels[:len(s.labels):len(s.labels)], out.String())
}

// histogram returns the histogram's child of the first label.
func (s *series[O]) histogram() prometheus.Observer {
	if h := s.hist.Load(); h != nil {
		return *h
	}
	h := s.histogramVec.WithLabelValues(s.labels[0])
	s.hist.Store(&h)
	return h
}
