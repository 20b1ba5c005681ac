package main

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/bench"
)

// A target is one of the performance targets the report checks, with what
// the run measured for it.
type target struct {
	name, measured string
	met            bool
}

func (r *report) targets() []target {
	var ts []target
	if r.rounds != nil {
		ts = append(ts, r.rounds.targets()...)
	}
	for _, pk := range r.perKey {
		if pk.Library == "sluicehq" {
			ts = append(ts, target{"memory per tracked key at most 32 B", fmt.Sprintf("%.1f B at %s keys", pk.Bytes, commas(pk.Keys)), pk.Bytes <= 32})
		}
	}
	if len(r.redis) > 0 {
		maxRT, maxCoalesced := 0.0, 0.0
		var ratios []string
		minRatio := math.Inf(1)
		for _, res := range r.redis {
			switch res.Library {
			case "sluicehq-plain":
				maxRT = math.Max(maxRT, res.RoundTripsPerCheck())
			case "sluicehq":
				maxRT = math.Max(maxRT, res.RoundTripsPerCheck())
				maxCoalesced = math.Max(maxCoalesced, res.RoundTripsPerCheck())
				for _, o := range r.redis {
					if o.Library == "redis_rate" && o.Case == res.Case {
						ratio := res.ChecksPerSec() / o.ChecksPerSec()
						minRatio = math.Min(minRatio, ratio)
						ratios = append(ratios, fmt.Sprintf("%s %.2fx", caseTitle(res.Case), ratio))
					}
				}
			}
		}
		ts = append(ts, target{"Redis: at most 1 round trip per check (default and without coalescing)", fmt.Sprintf("at most %.2f", maxRT), maxRT <= 1.0001})
		ts = append(ts, target{"Redis, with coalescing (default), 64 concurrent: at most 0.25 round trips per check", fmt.Sprintf("at most %.2f", maxCoalesced), maxCoalesced <= 0.25})
		ts = append(ts, target{"Redis: at least 2x the throughput of redis_rate (default store)", strings.Join(ratios, "; "), minRatio >= 2})
		for _, res := range r.redis {
			if res.Library == "sluicehq" && res.Case == (bench.Case{Deny: true, Keys: 1}) {
				ts = append(ts, target{"Redis: a denied hot key costs no round trip while known denied", fmt.Sprintf("%.4f round trips per denied check", res.RoundTripsPerCheck()), res.RoundTripsPerCheck() < 0.01})
			}
		}
	}
	if len(r.accuracy) > 0 {
		ok := true
		var bad []string
		for _, run := range r.accuracy {
			if run.Algorithm == ratelimit.SlidingWindow {
				continue
			}
			for _, c := range bench.Checks(run) {
				if !c.OK {
					ok = false
					bad = append(bad, fmt.Sprintf("%v %s %s: %d > %d", run.Algorithm, run.Pattern, c.What, c.Max, c.Bound))
				}
			}
		}
		m := "every bound held (GCRA, fixed window, sliding log)"
		if !ok {
			m = strings.Join(bad, "; ")
		}
		ts = append(ts, target{"accuracy: 4 instances on one Redis never exceed the limit (exact modes)", m, ok})
		var sw []string
		swOK := true
		for _, run := range r.accuracy {
			if run.Algorithm == ratelimit.SlidingWindow {
				for _, c := range bench.Checks(run) {
					sw = append(sw, fmt.Sprintf("%s: %d (rate %d)", run.Pattern, c.Max, c.Bound))
					swOK = swOK && c.OK
				}
			}
		}
		ts = append(ts, target{"accuracy: sliding window at most rate per trailing period", strings.Join(sw, "; "), swOK})
	}
	if len(r.load) == 3 {
		added := r.load[2].P99 - r.load[0].P99
		ts = append(ts, target{"added p99 latency under load, Redis on loopback, under 1 ms", signed(added), added < time.Millisecond})
	}
	return ts
}
