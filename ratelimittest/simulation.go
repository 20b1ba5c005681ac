package ratelimittest

import (
	"math/rand/v2"
	"slices"
	"time"
)

// Simulation is a deterministic discrete-event simulation of a server
// behind a concurrency limiter, on a clock of its own: Workers serve a
// FIFO queue, each request taking Service ± Jitter, and Clients
// closed-loop clients send a request as soon as their previous one is
// answered (after Backoff when it was rejected or dropped). It measures
// what an adaptive limit is for: the limit, latency and goodput over time.
//
// The same Simulation with the same Seed gives the same result for a
// limiter that reads time only from the times it is given. With Sleep set,
// the simulation also sleeps until each event, so that run inside a
// testing/synctest bubble a limiter that reads time.Now sees virtual time
// too.
type Simulation struct {
	Workers  func(t time.Duration) int     // workers at time t: the capacity C
	Clients  func(t time.Duration) int     // closed-loop clients active at t: the offered concurrency
	Service  time.Duration                 // mean service time
	Slowdown func(t time.Duration) float64 // if set, multiplies the service time of requests started at t
	Jitter   float64                       // service times are uniform in Service×[1-Jitter, 1+Jitter]
	Backoff  time.Duration                 // a rejected or dropped client's pause; Service when zero
	Timeout  time.Duration                 // a request queued longer is answered as a drop (503); 0: never
	Duration time.Duration                 // how long to simulate
	Step     time.Duration                 // the resolution of the recorded series; 100ms when zero
	Seed     uint64
	Critical func(client int) bool // a client's priority; all critical when nil
	Sleep    bool                  // sleep until each event (inside testing/synctest)
}

// SimLimiter is the limiter a Simulation drives: Acquire admits a request
// at now, or not; release reports its end and whether it was dropped.
type SimLimiter interface {
	Acquire(now time.Time, critical bool) (release func(now time.Time, drop bool), ok bool)
	Limit() int
}

// SimPoint is one Step of a simulation, ending at T.
type SimPoint struct {
	T         time.Duration
	Limit     int           // the limit at T
	InFlight  int           // admitted and unanswered at T
	Workers   int           // the capacity at T
	P50       time.Duration // median latency of the successes answered in the step
	Successes int
	Drops     int
	Rejected  int // attempts the limiter rejected
	Attempts  int
	latencies []time.Duration
}

// SimResult is the series of a simulation.
type SimResult struct {
	Points []SimPoint
	Step   time.Duration
}

// SimStats summarises the steps of a SimResult ending in (from, to].
type SimStats struct {
	P50, P99                    time.Duration
	Goodput                     float64 // successes per second
	Successes, Drops, Rejected  int
	Attempts                    int
	MinLimit, MaxLimit          int
	MeanLimit                   float64
	CapacityPerSecond           float64 // mean workers / Service (Slowdown not included)
	RejectionRate, GoodputShare float64 // Rejected/Attempts; Goodput/CapacityPerSecond
}

type simEvent struct {
	at     time.Duration
	seq    int
	kind   uint8 // 0 issue, 1 done, 2 tick
	client int
	job    *simJob
}

type simJob struct {
	client  int
	arrival time.Duration
	release func(time.Time, bool)
}

// simQueue is a binary min-heap of events by (at, seq).
type simQueue []simEvent

func (q simQueue) less(i, j int) bool {
	return q[i].at < q[j].at || q[i].at == q[j].at && q[i].seq < q[j].seq
}

func (q *simQueue) push(e simEvent) {
	*q = append(*q, e)
	h := *q
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !h.less(i, p) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (q *simQueue) pop() simEvent {
	h := *q
	e := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	for i := 0; ; {
		c := 2*i + 1
		if c >= n {
			break
		}
		if c+1 < n && h.less(c+1, c) {
			c++
		}
		if !h.less(c, i) {
			break
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
	*q = h
	return e
}

type simRun struct {
	s        *Simulation
	l        SimLimiter
	rng      *rand.Rand
	events   simQueue
	seq      int
	start    time.Time
	queue    []*simJob
	busy     int
	inflight int
	cur      SimPoint
	out      SimResult
}

// Run simulates the server behind l and returns the series.
func (s Simulation) Run(l SimLimiter) SimResult {
	if s.Step <= 0 {
		s.Step = 100 * time.Millisecond
	}
	if s.Backoff <= 0 {
		s.Backoff = s.Service
	}
	r := &simRun{s: &s, l: l, rng: rand.New(rand.NewPCG(s.Seed, s.Seed^0x9e3779b97f4a7c15)), start: Epoch()}
	if s.Sleep {
		r.start = time.Now()
	}
	r.out.Step = s.Step
	for c := 0; c < maxClients(s); c++ {
		r.push(simEvent{at: 0, kind: 0, client: c})
	}
	r.push(simEvent{at: s.Step, kind: 2})
	now := time.Duration(0)
	for len(r.events) > 0 {
		e := r.events.pop()
		if e.at > s.Duration {
			break
		}
		if s.Sleep && e.at > now {
			time.Sleep(e.at - now)
		}
		now = e.at
		switch e.kind {
		case 0:
			r.issue(e.client, now)
		case 1:
			r.done(e.job, now)
		case 2:
			r.tick(now)
		}
	}
	return r.out
}

func maxClients(s Simulation) int {
	n := 0
	for t := time.Duration(0); t <= s.Duration; t += s.Step {
		n = max(n, s.Clients(t))
	}
	return n
}

func (r *simRun) push(e simEvent) {
	r.seq++
	e.seq = r.seq
	r.events.push(e)
}

func (r *simRun) at(t time.Duration) time.Time { return r.start.Add(t) }

func (r *simRun) issue(c int, now time.Duration) {
	if c >= r.s.Clients(now) { // inactive: look again next step
		r.push(simEvent{at: (now/r.s.Step + 1) * r.s.Step, kind: 0, client: c})
		return
	}
	r.cur.Attempts++
	critical := r.s.Critical == nil || r.s.Critical(c)
	release, ok := r.l.Acquire(r.at(now), critical)
	if !ok {
		r.cur.Rejected++
		r.push(simEvent{at: now + r.s.Backoff, kind: 0, client: c})
		return
	}
	r.inflight++
	r.queue = append(r.queue, &simJob{client: c, arrival: now, release: release})
	r.dispatch(now)
}

func (r *simRun) dispatch(now time.Duration) {
	for r.busy < r.s.Workers(now) && len(r.queue) > 0 {
		j := r.queue[0]
		r.queue = r.queue[1:]
		if r.s.Timeout > 0 && now-j.arrival > r.s.Timeout {
			r.inflight--
			r.cur.Drops++
			j.release(r.at(now), true)
			r.push(simEvent{at: now + r.s.Backoff, kind: 0, client: j.client})
			continue
		}
		r.busy++
		st := float64(r.s.Service) * (1 + r.s.Jitter*(2*r.rng.Float64()-1))
		if r.s.Slowdown != nil {
			st *= r.s.Slowdown(now)
		}
		r.push(simEvent{at: now + time.Duration(st), kind: 1, job: j})
	}
}

func (r *simRun) done(j *simJob, now time.Duration) {
	r.busy--
	r.inflight--
	r.cur.Successes++
	r.cur.latencies = append(r.cur.latencies, now-j.arrival)
	j.release(r.at(now), false)
	r.push(simEvent{at: now, kind: 0, client: j.client})
	r.dispatch(now)
}

func (r *simRun) tick(now time.Duration) {
	p := r.cur
	p.T, p.Limit, p.InFlight, p.Workers = now, r.l.Limit(), r.inflight, r.s.Workers(now)
	p.P50 = quantile(p.latencies, 0.5)
	r.out.Points = append(r.out.Points, p)
	r.cur = SimPoint{}
	r.push(simEvent{at: now + r.s.Step, kind: 2})
}

func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// Between summarises the steps ending in (from, to].
func (res SimResult) Between(from, to time.Duration, service time.Duration) SimStats {
	var st SimStats
	var lats []time.Duration
	var sumLimit, sumWorkers float64
	n := 0
	st.MinLimit = int(^uint(0) >> 1)
	for _, p := range res.Points {
		if p.T <= from || p.T > to {
			continue
		}
		n++
		lats = append(lats, p.latencies...)
		st.Successes += p.Successes
		st.Drops += p.Drops
		st.Rejected += p.Rejected
		st.Attempts += p.Attempts
		st.MinLimit, st.MaxLimit = min(st.MinLimit, p.Limit), max(st.MaxLimit, p.Limit)
		sumLimit += float64(p.Limit)
		sumWorkers += float64(p.Workers)
	}
	if n == 0 {
		return SimStats{}
	}
	secs := (time.Duration(n) * res.Step).Seconds()
	st.P50, st.P99 = quantile(lats, 0.5), quantile(lats, 0.99)
	st.Goodput = float64(st.Successes) / secs
	st.MeanLimit = sumLimit / float64(n)
	st.CapacityPerSecond = sumWorkers / float64(n) / service.Seconds()
	st.GoodputShare = st.Goodput / st.CapacityPerSecond
	if st.Attempts > 0 {
		st.RejectionRate = float64(st.Rejected) / float64(st.Attempts)
	}
	return st
}
