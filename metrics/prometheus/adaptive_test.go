package ratelimitprom_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/adaptive"
	ratelimitprom "github.com/sluicehq/ratelimit/metrics/prometheus"
	"github.com/sluicehq/ratelimit/ratelimittest"
)

// TestAdaptiveCollectorExportsState: the gauges follow the limiter's
// state, summed over keys, and unknown rules export nothing.
func TestAdaptiveCollectorExportsState(t *testing.T) {
	lim := ratelimit.NewRulesLimiter([]ratelimit.Rule{
		{Name: "inflight", Key: ratelimit.ByHeader("X-Route"), Adaptive: &adaptive.Config{Min: 7, Max: 7, Initial: 7}},
	})
	reg := prometheus.NewRegistry()
	reg.MustRegister(ratelimitprom.AdaptiveCollector(lim, "inflight", "no-such-rule"))
	held := []func(){}
	for _, route := range []string{"a", "b", "b"} {
		done, ok := lim.Admit(ratelimittest.NewDiscardWriter(), ratelimittest.NewRequest("GET", "/", "", "X-Route", route))
		if !ok {
			t.Fatal("rejected")
		}
		held = append(held, done)
	}
	want := `
# HELP ratelimit_adaptive_in_flight Requests in flight under an adaptive rule.
# TYPE ratelimit_adaptive_in_flight gauge
ratelimit_adaptive_in_flight{rule="inflight"} 3
# HELP ratelimit_adaptive_limit Requests in flight an adaptive rule allows now.
# TYPE ratelimit_adaptive_limit gauge
ratelimit_adaptive_limit{rule="inflight"} 14
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "ratelimit_adaptive_in_flight", "ratelimit_adaptive_limit"); err != nil {
		t.Fatal(err)
	}
	for _, done := range held {
		done()
	}
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 4 {
		t.Fatalf("%d series (%v), want 4: one rule, four gauges", n, err)
	}
}

// TestAdaptiveCollectorExportsRTTs: once windows have closed, the minimum
// RTT and the sample RTT are those of the limiter's state, in seconds.
func TestAdaptiveCollectorExportsRTTs(t *testing.T) {
	clock := ratelimittest.NewClock(time.Time{})
	lim := ratelimit.NewRulesLimiter([]ratelimit.Rule{{Name: "inflight", Key: ratelimit.Global(), Adaptive: &adaptive.Config{}}}, ratelimit.WithClock(clock))
	reg := prometheus.NewRegistry()
	reg.MustRegister(ratelimitprom.AdaptiveCollector(lim, "inflight"))
	// Sequential requests of 5 ms: a window closes every 100 ms.
	h := lim.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { clock.Advance(5 * time.Millisecond) }))
	for range 61 {
		ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", ""))
	}
	st := lim.Adaptive("inflight")[0]
	if st.MinRTT < 4*time.Millisecond || st.MinRTT > 6*time.Millisecond || st.SampleRTT == 0 {
		t.Fatalf("state %+v: want a minimum RTT of about 5ms", st)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		got[mf.GetName()] = mf.GetMetric()[0].GetGauge().GetValue()
	}
	if got["ratelimit_adaptive_min_rtt_seconds"] != st.MinRTT.Seconds() || got["ratelimit_adaptive_sample_rtt_seconds"] != st.SampleRTT.Seconds() {
		t.Fatalf("exported %v; state MinRTT %v, SampleRTT %v", got, st.MinRTT, st.SampleRTT)
	}
}
