package bench

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/failsafe-go/failsafe-go/adaptivelimiter"
	"github.com/platinummonkey/go-concurrency-limits/core"
	gcllimit "github.com/platinummonkey/go-concurrency-limits/limit"
	gcllimiter "github.com/platinummonkey/go-concurrency-limits/limiter"
	gclstrategy "github.com/platinummonkey/go-concurrency-limits/strategy"

	"github.com/sluicehq/ratelimit/adaptive"
	"github.com/sluicehq/ratelimit/ratelimittest"
)

// The simulated server of the adaptive comparison: 20 workers, 5 ms ± 50%
// per request, 200 closed-loop clients (ten times the capacity), requests
// queued longer than a second answered 503.
const (
	AdaptiveWorkers = 20
	AdaptiveService = 5 * time.Millisecond
)

// AdaptiveScenario is one workload of the comparison.
type AdaptiveScenario struct {
	Name    string
	Initial int // the limiters' initial limit
	Sim     ratelimittest.Simulation
}

// AdaptiveScenarios returns the workloads: a start ten times too high,
// capacity halving at 10 s (half the workers), every request twice as slow
// from 10 s (same workers), 65 s of steady overload and 60 s at half the
// capacity.
func AdaptiveScenarios() []AdaptiveScenario {
	base := func(d time.Duration) ratelimittest.Simulation {
		return ratelimittest.Simulation{
			Workers: func(time.Duration) int { return AdaptiveWorkers }, Clients: func(time.Duration) int { return 200 },
			Service: AdaptiveService, Jitter: 0.5, Timeout: time.Second, Duration: d, Seed: 1, Sleep: true,
		}
	}
	halving := base(20 * time.Second)
	halving.Workers = func(t time.Duration) int {
		if t >= 10*time.Second {
			return AdaptiveWorkers / 2
		}
		return AdaptiveWorkers
	}
	slowdown := base(30 * time.Second)
	slowdown.Slowdown = func(t time.Duration) float64 {
		if t >= 10*time.Second {
			return 2
		}
		return 1
	}
	light := base(60 * time.Second)
	light.Clients = func(time.Duration) int { return AdaptiveWorkers / 2 }
	return []AdaptiveScenario{
		{"start-high", 10 * AdaptiveWorkers, base(20 * time.Second)},
		{"halving", AdaptiveWorkers, halving},
		{"slowdown", AdaptiveWorkers, slowdown},
		{"steady", AdaptiveWorkers, base(65 * time.Second)},
		{"light", AdaptiveWorkers, light},
	}
}

// AdaptiveContender builds a limiter for a scenario; it must be called
// where the simulation runs (inside the synctest bubble), as limiters
// that read time.Now learn their epoch when built.
type AdaptiveContender struct {
	Name string
	New  func(initial int) ratelimittest.SimLimiter
}

// AdaptiveContenders are the limiters compared, each with its defaults
// and the same bounds (1 to 1000) and initial limit: this module's,
// failsafe-go's adaptivelimiter, and the Vegas and Gradient2 limits of
// platinummonkey/go-concurrency-limits (a Go port of Netflix's
// concurrency-limits) behind its DefaultLimiter and SimpleStrategy.
var AdaptiveContenders = []AdaptiveContender{
	{"sluicehq", func(initial int) ratelimittest.SimLimiter {
		return simOurs{adaptive.New(adaptive.Config{Initial: initial, Max: 1000})}
	}},
	{"failsafe-go", func(initial int) ratelimittest.SimLimiter {
		return simFailsafe{adaptivelimiter.NewBuilder[any]().WithLimits(1, 1000, uint(initial)).Build()}
	}},
	{"gcl-vegas", func(initial int) ratelimittest.SimLimiter {
		return newSimGCL(gcllimit.NewDefaultVegasLimitWithLimit("vegas", initial, gcllimit.NoopLimitLogger{}, core.EmptyMetricRegistryInstance), initial)
	}},
	{"gcl-gradient2", func(initial int) ratelimittest.SimLimiter {
		l, err := gcllimit.NewGradient2Limit("gradient2", initial, 1000, 1, nil, 0.2, 600, gcllimit.NoopLimitLogger{}, core.EmptyMetricRegistryInstance)
		if err != nil {
			panic(err)
		}
		return newSimGCL(l, initial)
	}},
}

// simGCL drives a go-concurrency-limits DefaultLimiter with the library's
// default windows (1 s, at least 100 samples), which reads time.Now: run
// it with Simulation.Sleep inside a testing/synctest bubble.
type simGCL struct{ l *gcllimiter.DefaultLimiter }

func newSimGCL(lim core.Limit, initial int) simGCL {
	l, err := gcllimiter.NewDefaultLimiter(lim, 1e9, 1e9, 1e5, 100, gclstrategy.NewSimpleStrategy(initial), gcllimit.NoopLimitLogger{}, core.EmptyMetricRegistryInstance)
	if err != nil {
		panic(err)
	}
	return simGCL{l}
}

func (s simGCL) Acquire(time.Time, bool) (func(time.Time, bool), bool) {
	ln, ok := s.l.Acquire(context.Background())
	if !ok {
		return nil, false
	}
	return simRelease(ln.OnSuccess, ln.OnDropped), true
}

func (s simGCL) Limit() int { return s.l.EstimatedLimit() }

// simOurs drives this module's limiter through Acquire and Release, which
// read the clock like the others: run it with Simulation.Sleep inside a
// testing/synctest bubble.
type simOurs struct{ l *adaptive.Limiter }

func (s simOurs) Acquire(_ time.Time, critical bool) (func(time.Time, bool), bool) {
	t, ok := s.l.Acquire(critical)
	if !ok {
		return nil, false
	}
	return func(_ time.Time, drop bool) {
		v := adaptive.SampleSuccess
		if drop {
			v = adaptive.SampleDrop
		}
		t.Release(v)
	}, true
}

func (s simOurs) Limit() int { return s.l.State().Limit }

// simFailsafe drives failsafe-go's limiter, which reads time.Now: run it
// with Simulation.Sleep inside a testing/synctest bubble.
type simFailsafe struct {
	l adaptivelimiter.AdaptiveLimiter[any]
}

func (s simFailsafe) Acquire(time.Time, bool) (func(time.Time, bool), bool) {
	p, ok := s.l.TryAcquirePermit()
	if !ok {
		return nil, false
	}
	return simRelease(p.Record, p.Drop), true
}

// simRelease is the release of a permit whose limiter measures its own
// time: success or drop.
func simRelease(success, drop func()) func(time.Time, bool) {
	return func(_ time.Time, dropped bool) {
		if dropped {
			drop()
		} else {
			success()
		}
	}
}

func (s simFailsafe) Limit() int { return s.l.Limit() }

// AdaptiveFigures are the measured figures of one limiter on one scenario.
type AdaptiveFigures struct {
	Scenario, Limiter string
	// Entered is the first time the limit was within [C, 2C] from the
	// scenario's change on (start-high: the start; halving, slowdown: 10 s),
	// -1 if never; Converged is that delay from the change.
	Entered, Converged time.Duration
	LimitAt5s          int
	After              ratelimittest.SimStats // from Entered (start-high), 12 s (halving), 13 s (slowdown), 5 s (steady), 0 (light)
	Spread             float64                // (max-min)/mean of the limit over After
	LimitError         float64                // mean |limit - C| / C over After; -1 for light, where the limit is not bound
}

// change is when the scenario's capacity changes (its start for
// start-high), or -1 when the limit has nothing to converge to.
func (sc AdaptiveScenario) change() time.Duration {
	switch sc.Name {
	case "halving", "slowdown":
		return 10 * time.Second
	case "light":
		return -1
	}
	return 0
}

// Figures measures res for the scenario.
func (sc AdaptiveScenario) Figures(limiter string, res ratelimittest.SimResult) AdaptiveFigures {
	f := AdaptiveFigures{Scenario: sc.Name, Limiter: limiter, Entered: -1, Converged: -1, LimitError: -1}
	change := sc.change()
	for _, p := range res.Points {
		if change >= 0 && p.T > change && p.Limit >= p.Workers && p.Limit <= 2*p.Workers {
			f.Entered, f.Converged = p.T, p.T-change
			break
		}
	}
	f.LimitAt5s = res.Between(5*time.Second-res.Step, 5*time.Second, AdaptiveService).MaxLimit
	from := map[string]time.Duration{"start-high": f.Entered, "halving": 12 * time.Second, "slowdown": 13 * time.Second, "steady": 5 * time.Second}[sc.Name]
	if sc.Name == "start-high" && f.Entered < 0 {
		from = 5 * time.Second
	}
	service := AdaptiveService
	if sc.Sim.Slowdown != nil {
		service = time.Duration(float64(service) * sc.Sim.Slowdown(sc.Sim.Duration))
	}
	f.After = res.Between(from, sc.Sim.Duration, service)
	if f.After.MeanLimit > 0 {
		f.Spread = float64(f.After.MaxLimit-f.After.MinLimit) / f.After.MeanLimit
	}
	if change >= 0 {
		var sum float64
		n := 0
		for _, p := range res.Points {
			if p.T > from && p.T <= sc.Sim.Duration {
				sum += math.Abs(float64(p.Limit-p.Workers)) / float64(p.Workers)
				n++
			}
		}
		f.LimitError = sum / float64(max(n, 1))
	}
	return f
}

// AdaptiveTable renders the figures as a Markdown table.
func AdaptiveTable(figs []AdaptiveFigures) string {
	var b strings.Builder
	b.WriteString("| scenario | limiter | in [C, 2C] after | limit at 5 s | limit after (min..max) | limit error | p50 | p99 | goodput | rejected | spread |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, f := range figs {
		converged, limitErr := "never", "-"
		if f.Converged >= 0 {
			converged = f.Converged.String()
		}
		if f.LimitError < 0 {
			converged = "-"
		} else {
			limitErr = fmt.Sprintf("%.0f%%", 100*f.LimitError)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %d | %d..%d | %s | %v | %v | %.1f%% | %.3f%% | %.0f%% |\n", f.Scenario, f.Limiter, converged, f.LimitAt5s,
			f.After.MinLimit, f.After.MaxLimit, limitErr, f.After.P50.Round(100*time.Microsecond), f.After.P99.Round(100*time.Microsecond),
			100*f.After.GoodputShare, 100*f.After.RejectionRate, 100*f.Spread)
	}
	return b.String()
}

// AdaptiveCharts returns the limit and latency charts of one scenario, one
// series per limiter.
func AdaptiveCharts(sc AdaptiveScenario, results map[string]ratelimittest.SimResult, order []string) (limit, latency *LineChart) {
	limit = &LineChart{
		Title: "Adaptive concurrency limit, " + sc.Name, XLabel: "simulated seconds", YLabel: "limit (requests in flight)",
		Note: fmt.Sprintf("%d workers, %v ± 50%% service time, 200 closed-loop clients; dashed: the capacity C", AdaptiveWorkers, AdaptiveService),
	}
	latency = &LineChart{
		Title: "Median latency, " + sc.Name, XLabel: "simulated seconds", YLabel: "p50 latency (ms) per 100 ms",
		Note: "dashed: 2.5x the service time",
		Refs: []Ref{{Name: "2.5x service time", Y: 2.5 * float64(AdaptiveService) / float64(time.Millisecond), Color: "#999"}},
	}
	var cx, cy []float64
	for i, name := range order {
		res := results[name]
		var x, lim, lat []float64
		for _, p := range res.Points {
			x = append(x, p.T.Seconds())
			lim = append(lim, float64(p.Limit))
			lat = append(lat, float64(p.P50)/float64(time.Millisecond))
			if i == 0 {
				cx, cy = append(cx, p.T.Seconds()), append(cy, float64(p.Workers))
			}
		}
		limit.Series = append(limit.Series, Series{Name: name, X: x, Y: lim})
		latency.Series = append(latency.Series, Series{Name: name, X: x, Y: lat})
	}
	limit.Series = append(limit.Series, Series{Name: "capacity C", X: cx, Y: cy, Dash: "6 4", Color: "#999"})
	return limit, latency
}
