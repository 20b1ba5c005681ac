package fair_test

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/ratelimit/fair"
)

// The guarantees of the Scheduler, shown on the simulation harness in virtual time.

const (
	simSvc = 10 * time.Millisecond
	simDur = 10 * time.Second
)

func TestWorkConservingUnderAnyMix(t *testing.T) {
	levels := func() []fair.Level {
		return []fair.Level{
			{Name: "a", Shares: 50}, {Name: "b", Shares: 30}, {Name: "c", Shares: 20}, {Name: "z"},
		}
	}
	const seats = 8
	capacity := seats * float64(time.Second/simSvc) // requests per second
	mixes := []struct {
		name  string
		flows []simFlow
	}{
		{"one level one flow 2x", []simFlow{{level: "a", flow: "x", rate: 2 * capacity}}},
		{"smallest share alone borrows 2x", []simFlow{{level: "c", flow: "x", rate: 2 * capacity}}},
		{"no-share level alone 1.5x", []simFlow{{level: "z", flow: "x", rate: 1.5 * capacity}}},
		{"all levels 3x, many flows", func() []simFlow {
			var fs []simFlow
			for i, l := range []string{"a", "b", "c", "z"} {
				for j := range 5 {
					fs = append(fs, simFlow{level: l, flow: fmt.Sprint(i, j), rate: 3 * capacity / 20})
				}
			}
			return fs
		}()},
		{"a and c 1.2x, fixed service", []simFlow{
			{level: "a", flow: "x", rate: 0.6 * capacity, fixed: true},
			{level: "c", flow: "y", rate: 0.6 * capacity, fixed: true},
		}},
	}
	for i, m := range mixes {
		t.Run(m.name, func(t *testing.T) {
			for j := range m.flows {
				m.flows[j].svc = simSvc
			}
			synctest.Test(t, func(t *testing.T) {
				out := simulate(fair.Config{Seats: seats, Levels: levels(), MaxWait: time.Second},
					arrivals(uint64(i+1), simDur, m.flows...))
				got := throughput(out, seats, time.Second, simDur-time.Second)
				t.Logf("busy seats: %.2f%% of %d", 100*got, seats)
				if got < 0.95 {
					t.Errorf("throughput %.3f of seats x service rate, want >= 0.95", got)
				}
			})
		})
	}
}

func TestPresetKeepsCriticalAvailableAndExemptUntouchedAt2xOverload(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const seats = 10
		capacity := seats * float64(time.Second/simSvc)
		var flows []simFlow
		for i := range 20 { // 2x overload: half critical, half sheddable
			flows = append(flows,
				simFlow{level: fair.LevelCritical, flow: fmt.Sprint("c", i), rate: capacity / 20, svc: simSvc},
				simFlow{level: fair.LevelTest, flow: fmt.Sprint("t", i), rate: capacity / 20, svc: simSvc})
		}
		flows = append(flows, simFlow{level: fair.LevelExempt, flow: "probe", rate: 50, svc: simSvc})
		cfg := fair.Preset(seats, nil)
		cfg.MaxWait = time.Second
		out := simulate(cfg, arrivals(3, simDur, flows...))
		crit := summarize(out, byLevel(fair.LevelCritical))
		shed := summarize(out, byLevel(fair.LevelTest))
		ex := summarize(out, byLevel(fair.LevelExempt))
		t.Logf("critical %.3f%% of %d (p99 wait %v), test %.1f%% of %d, exempt %d/%d (max wait %v)",
			100*crit.availability(), crit.n, crit.quantile(0.99), 100*shed.availability(), shed.n, ex.admitted, ex.n, ex.quantile(1))
		if crit.availability() < 0.995 {
			t.Errorf("critical availability %.4f, want >= 0.995", crit.availability())
		}
		if shed.availability() > 0.5 {
			t.Errorf("sheddable availability %.3f: the server was not overloaded", shed.availability())
		}
		if ex.admitted != ex.n || ex.n == 0 {
			t.Errorf("exempt: %d of %d admitted, want all", ex.admitted, ex.n)
		}
		if w := ex.quantile(1); w != 0 {
			t.Errorf("exempt requests waited up to %v, want 0", w)
		}
	})
}

func TestNoWaitPastMaxWaitOrDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const maxWait = 50 * time.Millisecond
		reqs := arrivals(11, 3*time.Second,
			simFlow{level: "l", flow: "a", rate: 2000, svc: simSvc},
			simFlow{level: "l", flow: "b", rate: 500, svc: simSvc})
		for i := range reqs {
			if i%3 == 0 {
				reqs[i].deadline = time.Duration(i%7) * 5 * time.Millisecond // some already expired
			}
		}
		cfg := fair.Config{Seats: 4, MaxWait: maxWait, Levels: []fair.Level{{Name: "l", Shares: 1}}}
		out := simulate(cfg, reqs)
		timedOut := 0
		for _, o := range out {
			bound := maxWait
			if o.deadline > 0 {
				bound = min(bound, o.deadline)
			}
			if o.wait > bound+5*time.Millisecond {
				t.Fatalf("a request waited %v, bound %v (+5ms)", o.wait, bound)
			}
			if o.status == 503 {
				timedOut++
				if o.retry < "1" || len(o.retry) > 2 {
					t.Fatalf("Retry-After %q, want 1-32", o.retry)
				}
			}
		}
		if timedOut == 0 {
			t.Fatal("no request timed out: the scenario does not test the bound")
		}
	})
}

var fairChartOut = flag.String("fairchart.out", "", "write the noisy-tenant per-flow rates, as JSON, to this file (bench/cmd/fairchart)")

// FairChartData is what TestChartData writes for bench/cmd/fairchart.
type FairChartData struct {
	Seats   int       `json:"seats"`
	SvcMS   float64   `json:"svc_ms"`
	Flows   []string  `json:"flows"`
	Offered []float64 `json:"offered"` // requests per second
	FIFO    []float64 `json:"fifo"`    // admitted per second, one FIFO queue
	Fair    []float64 `json:"fair"`    // admitted per second, fair queuing
}

// TestChartData runs the noisy-tenant scenario (4 seats) with and
// without fair queuing and checks that both keep the seats busy and never
// serve more at once than there are seats; with -fairchart.out it writes
// the per-flow rates.
func TestChartData(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const seats = 4
		d := FairChartData{Seats: seats, SvcMS: float64(simSvc) / float64(time.Millisecond)}
		fifo := noisyTenant(7, seats, false, oneFIFO, true)
		fq := noisyTenant(7, seats, false, fairQueuing, true)
		d.Flows = append(d.Flows, "elephant")
		for i := range 9 {
			d.Flows = append(d.Flows, fmt.Sprintf("mouse%d", i))
		}
		secs := noisyDur.Seconds()
		for _, fl := range d.Flows {
			sf, sq := summarize(fifo, byFlow(fl)), summarize(fq, byFlow(fl))
			d.Offered = append(d.Offered, float64(sq.n)/secs)
			d.FIFO = append(d.FIFO, float64(sf.admitted)/secs)
			d.Fair = append(d.Fair, float64(sq.admitted)/secs)
		}
		for name, out := range map[string][]simOut{"fifo": fifo, "fair": fq} {
			if busy := throughput(out, seats, time.Second, noisyDur); busy > 1 || busy < 0.95 {
				t.Errorf("%s kept %.3f of the seats busy, want 0.95-1", name, busy)
			}
		}
		t.Logf("%+v", d)
		if *fairChartOut == "" {
			return
		}
		b, err := json.MarshalIndent(d, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(*fairChartOut, b, 0o644); err != nil {
			t.Fatal(err)
		}
	})
}

// Under contention every level gets its nominal seats, whatever its
// priority: a borrower never holds a seat another level is owed.
func TestLevelsUnderContentionGetTheirShares(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const seats = 8
		capacity := seats * float64(time.Second/simSvc)
		var flows []simFlow
		for i := range 4 {
			flows = append(flows,
				simFlow{level: "hi", flow: fmt.Sprint("h", i), rate: capacity / 2, svc: simSvc},
				simFlow{level: "lo", flow: fmt.Sprint("l", i), rate: capacity / 2, svc: simSvc})
		}
		cfg := fair.Config{Seats: seats, MaxWait: time.Second,
			Levels: []fair.Level{{Name: "hi", Shares: 3}, {Name: "lo", Shares: 1}}}
		out := simulate(cfg, arrivals(5, simDur, flows...))
		hi, lo := seatShare(out, seats, byLevel("hi")), seatShare(out, seats, byLevel("lo"))
		wantShares(t, "hi", hi, 0.75, "lo", lo, 0.25, 0.03)
	})
}

// Flows are charged the service they take: of two backlogged flows, one of
// 2 ms requests and one of 20 ms requests, each holds half of the seats,
// so the quick one is served ten times as many requests.
func TestFlowsShareSeatTimeWhateverTheirServiceTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const seats = 4
		capacity := func(svc time.Duration) float64 { return seats * float64(time.Second/svc) }
		quick, slow := flowShares(seats, arrivals(9, simDur,
			simFlow{level: "l", flow: "quick", rate: capacity(2 * time.Millisecond), svc: 2 * time.Millisecond},
			simFlow{level: "l", flow: "slow", rate: capacity(20 * time.Millisecond), svc: 20 * time.Millisecond}),
			"quick", "slow")
		wantShares(t, "quick", quick, 0.5, "slow", slow, 0.5, 0.05)
	})
}

// The burst credit does not buy more than a fair share. A flow idle four
// fifths of each second, then sending at 4x the capacity for 200 ms (so
// that every burst starts with credit), beside a backlogged flow at 2x:
// while it has requests waiting (its 200 ms, then the 50 it queued drain
// at two seats, 250 ms) it holds half of the seats, 0.225 of them
// overall. Its credit of 4 requests adds at most 4 x 10 ms a second over
// 4 seats, 0.01. (A credit of 1000 requests would give it 0.33.)
func TestBurstCreditBuysNoMoreThanAFairShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const seats = 4
		capacity := seats * float64(time.Second/simSvc)
		reqs := arrivals(13, simDur,
			simFlow{level: "l", flow: "bursty", rate: 4 * capacity, svc: simSvc},
			simFlow{level: "l", flow: "backlogged", rate: 2 * capacity, svc: simSvc})
		reqs = slices.DeleteFunc(reqs, func(r simReq) bool { return r.flow == "bursty" && r.at%time.Second >= 200*time.Millisecond })
		bursty, backlogged := flowShares(seats, reqs, "bursty", "backlogged")
		t.Logf("bursty holds %.3f of the seats, backlogged %.3f", bursty, backlogged)
		fairShare := (0.2 + fair.DefaultQueueLength*simSvc.Seconds()/(seats/2)) / 2
		if bound := fairShare + 4*simSvc.Seconds()/seats + 0.01; bursty > bound {
			t.Errorf("bursty holds %.3f of the seats, want <= %.3f (%.3f its share while it waits, + its credit, + 0.01)", bursty, bound, fairShare)
		}
		if bursty+backlogged < 0.95 {
			t.Errorf("seats busy %.3f, want >= 0.95", bursty+backlogged)
		}
	})
}

// flowShares runs reqs through one level of the given seats and returns
// the fractions of the seats flows a and b held.
func flowShares(seats int, reqs []simReq, a, b string) (float64, float64) {
	out := simulate(fair.Config{Seats: seats, MaxWait: time.Second, Levels: []fair.Level{{Name: "l", Shares: 1}}}, reqs)
	return seatShare(out, seats, byFlow(a)), seatShare(out, seats, byFlow(b))
}

// wantShares checks that a and b held shares of the seats within tol of
// wantA and wantB.
func wantShares(t *testing.T, a string, gotA, wantA float64, b string, gotB, wantB, tol float64) {
	t.Helper()
	t.Logf("%s holds %.3f of the seats, %s %.3f", a, gotA, b, gotB)
	if math.Abs(gotA-wantA) > tol || math.Abs(gotB-wantB) > tol {
		t.Errorf("seat shares %s %.3f %s %.3f, want %.2f and %.2f (+-%.2f)", a, gotA, b, gotB, wantA, wantB, tol)
	}
}
