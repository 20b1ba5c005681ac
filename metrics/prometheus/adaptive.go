package ratelimitprom

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sluicehq/ratelimit"
)

// AdaptiveCollector exports the state of the adaptive rules named rules of
// l, read at each scrape:
//
//	ratelimit_adaptive_limit{rule}              gauge: requests in flight allowed
//	ratelimit_adaptive_in_flight{rule}          gauge
//	ratelimit_adaptive_min_rtt_seconds{rule}    gauge: the minimum RTT in use
//	ratelimit_adaptive_sample_rtt_seconds{rule} gauge: the last window's latency
//
// Keys are never labels: for a keyed rule, the limit and in-flight gauges
// are summed over its keys and the RTT gauges are the highest of its keys.
// A name that is not an adaptive rule of l exports nothing.
func AdaptiveCollector(l *ratelimit.Limiter, rules ...string) prometheus.Collector {
	if l == nil {
		panic("ratelimitprom: AdaptiveCollector(nil)")
	}
	desc := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("ratelimit_adaptive_"+name, help, []string{"rule"}, nil)
	}
	return &adaptiveCollector{l: l, rules: append([]string(nil), rules...),
		limit:    desc("limit", "Requests in flight an adaptive rule allows now."),
		inFlight: desc("in_flight", "Requests in flight under an adaptive rule."),
		minRTT:   desc("min_rtt_seconds", "The minimum RTT an adaptive rule compares latency with."),
		sample:   desc("sample_rtt_seconds", "The latency of an adaptive rule's last sample window."),
	}
}

type adaptiveCollector struct {
	l                               *ratelimit.Limiter
	rules                           []string
	limit, inFlight, minRTT, sample *prometheus.Desc
}

func (c *adaptiveCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.limit
	ch <- c.inFlight
	ch <- c.minRTT
	ch <- c.sample
}

func (c *adaptiveCollector) Collect(ch chan<- prometheus.Metric) {
	for _, rule := range c.rules {
		states := c.l.Adaptive(rule)
		if states == nil {
			continue
		}
		var limit, inFlight int
		var minRTT, sample time.Duration
		for _, s := range states {
			limit += s.Limit
			inFlight += s.InFlight
			minRTT, sample = max(minRTT, s.MinRTT), max(sample, s.SampleRTT)
		}
		ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, float64(limit), rule)
		ch <- prometheus.MustNewConstMetric(c.inFlight, prometheus.GaugeValue, float64(inFlight), rule)
		ch <- prometheus.MustNewConstMetric(c.minRTT, prometheus.GaugeValue, minRTT.Seconds(), rule)
		ch <- prometheus.MustNewConstMetric(c.sample, prometheus.GaugeValue, sample.Seconds(), rule)
	}
}
