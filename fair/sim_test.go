package fair_test

import (
	"context"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/fair"
)

// The simulation harness: requests arrive at given virtual times, go
// through a real Scheduler (Admit, then the service time, then done) and are
// recorded. Run it inside synctest.Test: every sleep and timer is virtual,
// so the results do not depend on the machine's load.

// simReq is one request of a scenario.
type simReq struct {
	at       time.Duration // arrival, from the start
	level    string
	flow     string
	svc      time.Duration // service time once admitted
	deadline time.Duration // the context's deadline after arrival; 0 for none
	cancelAt time.Duration // cancel the context this long after arrival; 0 for never
}

// simOut is what happened to it.
type simOut struct {
	simReq
	status int           // 200, or the refusal's status
	wait   time.Duration // from Admit's call to its return
	end    time.Duration // when it finished (served or refused)
	retry  string        // Retry-After of a refusal
}

// simulate runs reqs (sorted by arrival) through a Scheduler built from cfg,
// whose Classify and level Flow read the X-Level and X-Flow headers.
func simulate(cfg fair.Config, reqs []simReq) []simOut {
	cfg.Classify = func(r *http.Request) string { return r.Header.Get("X-Level") }
	for i := range cfg.Levels {
		cfg.Levels[i].Flow = ratelimit.ByHeader("X-Flow")
	}
	f := fair.New(cfg)
	out := make([]simOut, len(reqs))
	start := time.Now()
	var wg sync.WaitGroup
	for i, rq := range reqs {
		time.Sleep(rq.at - time.Since(start))
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = simOne(f, rq, start)
		}()
	}
	wg.Wait()
	return out
}

func simOne(f *fair.Scheduler, rq simReq, start time.Time) simOut {
	ctx := context.Background()
	if rq.deadline > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, rq.deadline)
		defer cancel()
	}
	if rq.cancelAt > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		stop := time.AfterFunc(rq.cancelAt, cancel)
		defer stop.Stop()
	}
	r := (&http.Request{Method: "GET", URL: &url.URL{Path: "/"}, Header: http.Header{
		"X-Level": {rq.level}, "X-Flow": {rq.flow},
	}}).WithContext(ctx)
	rec := httptest.NewRecorder()
	t0 := time.Now()
	done, ok := f.Admit(rec, r)
	o := simOut{simReq: rq, wait: time.Since(t0), status: 200}
	if ok {
		time.Sleep(rq.svc)
		done()
	} else {
		o.status = rec.Code
		o.retry = rec.Header().Get("Retry-After")
	}
	o.end = time.Since(start)
	return o
}

// simFlow describes a flow's traffic: Poisson arrivals at rate per second
// over dur, service times exponential with mean svc (or fixed when fixed).
type simFlow struct {
	level, flow string
	rate        float64
	svc         time.Duration
	fixed       bool
}

// arrivals generates the requests of flows over dur, sorted, from seed.
func arrivals(seed uint64, dur time.Duration, flows ...simFlow) []simReq {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var reqs []simReq
	for _, fl := range flows {
		for t := 0.0; ; {
			t += rng.ExpFloat64() / fl.rate
			at := time.Duration(t * float64(time.Second))
			if at >= dur {
				break
			}
			svc := fl.svc
			if !fl.fixed {
				svc = time.Duration(rng.ExpFloat64() * float64(fl.svc))
			}
			reqs = append(reqs, simReq{at: at, level: fl.level, flow: fl.flow, svc: max(svc, time.Microsecond)})
		}
	}
	sort.SliceStable(reqs, func(i, j int) bool { return reqs[i].at < reqs[j].at })
	return reqs
}

// simStats summarises the outcomes of the requests that match keep.
type simStats struct {
	n, admitted, s429, s503 int
	waits                   []time.Duration // of admitted requests
}

func summarize(out []simOut, keep func(simOut) bool) simStats {
	var s simStats
	for _, o := range out {
		if !keep(o) {
			continue
		}
		s.n++
		switch o.status {
		case 200:
			s.admitted++
			s.waits = append(s.waits, o.wait)
		case 429:
			s.s429++
		case 503:
			s.s503++
		}
	}
	slices.Sort(s.waits)
	return s
}

func (s simStats) availability() float64 {
	if s.n == 0 {
		return 1
	}
	return float64(s.admitted) / float64(s.n)
}

// quantile of the admitted requests' waits.
func (s simStats) quantile(q float64) time.Duration {
	if len(s.waits) == 0 {
		return 0
	}
	return s.waits[min(len(s.waits)-1, int(q*float64(len(s.waits))))]
}

// throughput is the rate of service completed inside [from, to): the
// seat-seconds of service overlapping the window over its length, as a
// fraction of seats.
func throughput(out []simOut, seats int, from, to time.Duration) float64 {
	busy := time.Duration(0)
	for _, o := range out {
		if o.status != 200 {
			continue
		}
		s := o.end - o.svc
		e := o.end
		busy += max(0, min(e, to)-max(s, from))
	}
	return float64(busy) / float64(to-from) / float64(seats)
}

func byFlow(name string) func(simOut) bool { return func(o simOut) bool { return o.flow == name } }

func byLevel(name string) func(simOut) bool { return func(o simOut) bool { return o.level == name } }

// seatShare is the fraction of the seats the requests that match keep held
// over a simDur run, its first and last second left out.
func seatShare(out []simOut, seats int, keep func(simOut) bool) float64 {
	var kept []simOut
	for _, o := range out {
		if keep(o) {
			kept = append(kept, o)
		}
	}
	return throughput(kept, seats, time.Second, simDur-time.Second)
}
