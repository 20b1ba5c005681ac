package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/stores"
	"github.com/sluicehq/ratelimit/stores/memory"
	redisstore "github.com/sluicehq/ratelimit/stores/redis"
)

// AccuracyLimit is the limit of the accuracy runs and of the timeline chart:
// fast enough that a few seconds cover several windows.
var AccuracyLimit = ratelimit.PerSecond(100)

// Algorithms are the algorithms whose accuracy is checked.
var Algorithms = []ratelimit.Algorithm{ratelimit.GCRA, ratelimit.SlidingWindow, ratelimit.FixedWindow, ratelimit.SlidingLog}

// Admission is one admitted request of an accuracy run, in Unix
// microseconds of the wall clock (the clock Redis's TIME reads on this host).
type Admission struct {
	Sent, Recv int64         // when the check was sent and answered
	ResetAfter time.Duration // the Result's, to place fixed-window decisions exactly
}

// Pattern is a load shape of the accuracy runs.
type Pattern string

const (
	// Steady: every worker checks back to back for the whole run.
	Steady Pattern = "steady"
	// Boundary: workers check only in the last and first 200 ms of every
	// second (of the epoch-aligned windows) and are idle in between: the
	// load that shows the fixed window's boundary burst.
	Boundary Pattern = "boundary"
)

// AccuracyRun is the record of one accuracy run.
type AccuracyRun struct {
	Algorithm ratelimit.Algorithm
	Pattern   Pattern
	Instances int
	Workers   int // per instance
	Duration  time.Duration
	Checks    int64
	Errors    int64
	Admitted  []Admission
	// RTTp99 and RTTMax are the p99 and largest round trip of the admitted
	// checks: the uncertainty of their timestamps.
	RTTp99, RTTMax time.Duration
}

// RunAccuracy runs instances limiters, each with its own Redis client and
// Store, on one shared key of srv under AccuracyLimit with alg, for d, and
// records every admitted request.
func RunAccuracy(srv *RedisServer, alg ratelimit.Algorithm, p Pattern, instances, workers int, d time.Duration) (*AccuracyRun, error) {
	ctx := context.Background()
	name := fmt.Sprintf("acc-%s-%s-%d", alg, p, time.Now().UnixNano())
	type inst struct {
		lim *ratelimit.Limiter
	}
	var insts []inst
	for i := 0; i < instances; i++ {
		c, _ := srv.Client(workers)
		defer c.Close()
		if err := c.Ping(ctx).Err(); err != nil {
			return nil, err
		}
		// A generous budget: this measures accuracy, and the Store's default
		// 50ms can be exceeded by a loaded machine's first calls.
		store := redisstore.New(c, redisstore.WithTimeout(5*time.Second))
		lim := ratelimit.NewRulesLimiter([]ratelimit.Rule{{Limit: AccuracyLimit, Key: ratelimit.ByIP(), Algorithm: alg, Name: name}}, ratelimit.WithStore(store))
		insts = append(insts, inst{lim})
	}
	run := &AccuracyRun{Algorithm: alg, Pattern: p, Instances: instances, Workers: workers, Duration: d}
	// Start 300 ms into a second, so the first fixed window is partial, as
	// it would be for a real client.
	now := time.Now()
	start := now.Truncate(time.Second).Add(time.Second + 300*time.Millisecond)
	deadline := start.Add(d)
	time.Sleep(time.Until(start))
	var mu sync.Mutex
	var checks, errs atomic.Int64
	var wg sync.WaitGroup
	for _, in := range insts {
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func(lim *ratelimit.Limiter) {
				defer wg.Done()
				var mine []Admission
				for first := true; ; first = false {
					t0 := time.Now()
					// Every worker checks at least once, even if a loaded
					// machine starts it after the deadline.
					if !first && !t0.Before(deadline) {
						break
					}
					if p == Boundary {
						if frac := t0.Sub(t0.Truncate(time.Second)); frac >= 200*time.Millisecond && frac < 800*time.Millisecond {
							time.Sleep(800*time.Millisecond - frac)
							continue
						}
					}
					res, err := lim.Allow(ctx, "client")
					t1 := time.Now()
					checks.Add(1)
					if err != nil {
						errs.Add(1)
						continue
					}
					if res.Allowed {
						mine = append(mine, Admission{Sent: t0.UnixMicro(), Recv: t1.UnixMicro(), ResetAfter: res.ResetAfter})
					}
				}
				mu.Lock()
				run.Admitted = append(run.Admitted, mine...)
				mu.Unlock()
			}(in.lim)
		}
	}
	wg.Wait()
	run.Checks, run.Errors = checks.Load(), errs.Load()
	rtts := make([]time.Duration, len(run.Admitted))
	for i, a := range run.Admitted {
		rtts[i] = time.Duration(a.Recv-a.Sent) * time.Microsecond
	}
	run.RTTp99, run.RTTMax = Percentile(rtts, 0.99), Percentile(rtts, 1)
	slices.SortFunc(run.Admitted, func(a, b Admission) int { return int(a.Sent - b.Sent) })
	return run, nil
}

// Check is one bound checked on an accuracy run.
type Check struct {
	What  string // e.g. "any 1s window"
	Max   int    // most admitted requests seen
	Bound int
	OK    bool
	Note  string
}

// MaxInWindow returns the most admissions whose whole round trip [Sent,
// Recv] lies in one interval of length d: those were certainly decided in
// that interval, whatever the network delay, so the count never overstates
// what the limiter admitted in it (it can understate by the requests in
// flight at the interval's edges).
func MaxInWindow(adm []Admission, d time.Duration) int {
	best := 0
	dus := d.Microseconds()
	for i := range adm {
		a := adm[i].Sent
		n := 0
		for j := i; j < len(adm) && adm[j].Sent <= a+dus; j++ {
			if adm[j].Recv <= a+dus {
				n++
			}
		}
		best = max(best, n)
	}
	return best
}

// MaxPerAlignedWindow places every fixed-window admission in its window
// exactly, from its ResetAfter (the time left to the window's end on the
// server) and returns the largest count, and how many admissions could not
// be placed consistently.
func MaxPerAlignedWindow(adm []Admission, period time.Duration) (most, unplaced int) {
	p := period.Microseconds()
	counts := map[int64]int{}
	for _, a := range adm {
		ra := a.ResetAfter.Microseconds()
		end := (a.Sent + ra + p - 1) / p * p // the first window end the decision can have
		if end > a.Recv+ra+1 {
			unplaced++
			continue
		}
		counts[end]++
	}
	for _, n := range counts {
		most = max(most, n)
	}
	return most, unplaced
}

// Checks returns the bounds that hold for run's algorithm under
// AccuracyLimit:
//
//   - GCRA: in any interval of length d, at most Burst + d/interval admitted
//     (checked for d of 100 ms, 500 ms, 1 s and 2 s).
//   - Sliding window: at most Rate in any trailing Period (the bound the
//     counter approximates; see the report for when it does not hold).
//   - Fixed window: at most Rate per aligned window, and up to twice that in
//     a trailing Period that straddles a boundary.
//   - Sliding log: at most Rate in any trailing Period, exactly.
func Checks(run *AccuracyRun) []Check {
	l := AccuracyLimit
	var out []Check
	switch run.Algorithm {
	case ratelimit.GCRA:
		for _, d := range []time.Duration{100 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second} {
			bound := l.Capacity() + int(d/l.Interval())
			m := MaxInWindow(run.Admitted, d)
			out = append(out, Check{What: "any " + d.String() + " interval", Max: m, Bound: bound, OK: m <= bound, Note: "burst + d/interval"})
		}
	case ratelimit.SlidingWindow, ratelimit.SlidingLog:
		m := MaxInWindow(run.Admitted, l.Period)
		out = append(out, Check{What: "any " + l.Period.String() + " interval", Max: m, Bound: l.Rate, OK: m <= l.Rate, Note: "rate per trailing period"})
	case ratelimit.FixedWindow:
		m, unplaced := MaxPerAlignedWindow(run.Admitted, l.Period)
		note := "rate per aligned window"
		if unplaced > 0 {
			note += fmt.Sprintf(" (%d admissions not placed)", unplaced)
		}
		out = append(out, Check{What: "aligned " + l.Period.String() + " window", Max: m, Bound: l.Rate, OK: m <= l.Rate && unplaced == 0, Note: note})
		t := MaxInWindow(run.Admitted, l.Period)
		out = append(out, Check{What: "any " + l.Period.String() + " interval", Max: t, Bound: 2 * l.Rate, OK: t <= 2*l.Rate, Note: "2 x rate across a boundary"})
	}
	return out
}

// Timeline is the simulated workload of the timeline chart, in seconds:
// phases of a client offering 3x the limit, and idle gaps, one of which ends
// just before a window boundary.
var Timeline = []struct {
	From, To float64
	PerSec   float64 // offered requests per second
	Label    string
}{
	{0, 3, 300, "steady 3x"},
	{3, 4.5, 0, "idle"},
	{4.5, 5.5, 300, "3x across 5 s"},
	{5.5, 6.5, 0, "idle"},
	{6.5, 9, 300, "steady 3x"},
}

// TimelineSeries simulates the Timeline against the memory store (explicit
// times, so it is exact and reproducible) for each algorithm, and returns
// the admitted requests per trailing second sampled every 10 ms, with the
// offered load as the last series.
func TimelineSeries() []Series {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) // on a window boundary
	var arrivals []float64
	for _, ph := range Timeline {
		if ph.PerSec == 0 {
			continue
		}
		step := 1 / ph.PerSec
		for t := ph.From; t < ph.To-1e-9; t += step {
			arrivals = append(arrivals, t)
		}
	}
	trailing := func(times []float64, name, dash string) Series {
		s := Series{Name: name, Dash: dash}
		end := Timeline[len(Timeline)-1].To
		for k := 0; float64(k)*0.01 <= end+1e-9; k++ {
			t := float64(k) * 0.01
			n := 0
			for _, a := range times {
				if a > t-1+1e-9 && a <= t+1e-9 {
					n++
				}
			}
			s.X = append(s.X, t)
			s.Y = append(s.Y, float64(n))
		}
		return s
	}
	var out []Series
	for _, alg := range Algorithms {
		st := memory.New()
		req := stores.Request{Rule: "timeline", Key: "client", Limit: AccuracyLimit, Algorithm: alg, Cost: 1}
		var admitted []float64
		for _, a := range arrivals {
			res, err := st.TakeAt(t0.Add(time.Duration(a*float64(time.Second))), req)
			if err != nil {
				panic(err)
			}
			if res.Allowed {
				admitted = append(admitted, a)
			}
		}
		out = append(out, trailing(admitted, alg.String(), ""))
	}
	offered := trailing(arrivals, "offered", "2 3")
	offered.Color = "#999999"
	out = append(out, offered)
	return out
}
