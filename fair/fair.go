package fair

import (
	"fmt"
	"math"
	"net/http"
	"sync"
	"time"
)

// Config configures New: how many requests the server serves at
// once (its seats), the priority levels that share them, and how long a
// request may wait for one.
type Config struct {
	// Seats is the number of requests served at once, when SeatsFunc is nil.
	Seats int

	// SeatsFunc, if set, supplies the current number of seats instead of
	// Seats (an adaptive concurrency limit, for example). It is called on
	// every admission and every completion, outside any lock, so it must be
	// fast and safe for concurrent use; values below 1 count as 1. When it
	// grows, waiting requests are admitted at the next admission or
	// completion.
	SeatsFunc func() int

	// Levels are the priority levels, highest priority first. Level names
	// must differ. See Level.
	Levels []Level

	// Classify maps a request to the name of its level. A name that matches
	// no level, or a nil Classify, selects the last level that is not
	// exempt (the lowest priority).
	Classify func(*http.Request) string

	// MaxWait bounds the time a request waits for a seat; 0 means 5s. A
	// request never waits past its context's deadline either.
	MaxWait time.Duration

	// Observer, if set, receives an Event for every decision.
	Observer Observer
}

// DefaultMaxWait is the MaxWait of a Config that sets none.
const DefaultMaxWait = 5 * time.Second

// Scheduler admits requests into a fixed (or externally driven) number of seats,
// sharing them between priority levels and, within a level, fairly between
// flows: the server-capacity layer that sits in front of per-client rate
// limits. It is Kubernetes API Priority and Fairness adapted to net/http:
//
//   - Each non-exempt level is guaranteed its share of the seats while it
//     has demand; seats a level leaves idle are lent to the others (minus
//     its Reserve), highest priority first, so the server stays busy.
//   - A request that finds no seat waits in one of its level's queues,
//     chosen by shuffle sharding of its flow key, and queues are served
//     in order of virtual finish time, so a flow sending ten times its
//     share waits behind itself, not in front of the others.
//   - A wait ends after MaxWait or at the request's context deadline
//     (503), or at once when its context ends; a full queue refuses the
//     flow's excess (429). Both carry a Retry-After computed from the
//     observed service time and an RFC 9457 problem body.
//
// Exempt levels (health checks, the control plane) are never queued or
// refused and take no seat.
//
// A Scheduler is safe for concurrent use. Its zero value is not usable; build it
// with New.
type Scheduler struct {
	mu        sync.Mutex
	levels    []*levelState // priority order
	byName    map[string]*levelState
	fallback  *levelState // for names no level has
	classify  func(*http.Request) string
	seatsFunc func() int
	maxWait   time.Duration
	obs       Observer

	// Guarded by mu.
	seats     int // current total
	inUse     int // seats taken, all levels
	queued    int // waiting requests, all levels
	protected int // sum over levels of their reserve not in use
}

// New returns a Scheduler for c. It panics with a "ratelimit: " message on an
// invalid configuration: no levels, no seats, a duplicate or empty level
// name, negative shares, a Reserve outside 0-100, or queue settings out of
// range (see Level).
func New(c Config) *Scheduler {
	if len(c.Levels) == 0 {
		panic("ratelimit: fair.New: no levels")
	}
	if c.SeatsFunc == nil && c.Seats < 1 {
		panic(fmt.Sprintf("ratelimit: fair.New: Seats must be at least 1, got %d", c.Seats))
	}
	if c.MaxWait < 0 {
		panic(fmt.Sprintf("ratelimit: fair.New: negative MaxWait %v", c.MaxWait))
	}
	f := &Scheduler{
		byName:    make(map[string]*levelState, len(c.Levels)),
		classify:  c.Classify,
		seatsFunc: c.SeatsFunc,
		maxWait:   c.MaxWait,
		obs:       c.Observer,
		seats:     c.Seats,
	}
	if f.maxWait == 0 {
		f.maxWait = DefaultMaxWait
	}
	for i, l := range c.Levels {
		lv := newLevelState(f, i, l)
		if _, dup := f.byName[l.Name]; dup {
			panic(fmt.Sprintf("ratelimit: fair.New: two levels are named %q", l.Name))
		}
		f.byName[l.Name] = lv
		f.levels = append(f.levels, lv)
		if !l.Exempt {
			f.fallback = lv
		}
	}
	if f.fallback == nil {
		panic("ratelimit: fair.New: every level is exempt")
	}
	if f.seatsFunc != nil {
		f.seats = max(1, f.seatsFunc())
	}
	f.apportion()
	return f
}

// Handler returns next wrapped by f.
func (f *Scheduler) Handler(next http.Handler) http.Handler {
	if next == nil {
		panic("ratelimit: Scheduler.Handler(nil)")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, ok := f.Acquire(w, r)
		if !ok {
			return
		}
		defer s.Release()
		next.ServeHTTP(w, r)
	})
}

// level classifies r.
func (f *Scheduler) level(r *http.Request) *levelState {
	if f.classify == nil {
		return f.fallback
	}
	if lv, ok := f.byName[f.classify(r)]; ok {
		return lv
	}
	return f.fallback
}

// readSeats returns SeatsFunc's current number of seats (at least 1), or 0
// without a SeatsFunc.
func (f *Scheduler) readSeats() int {
	if f.seatsFunc == nil {
		return 0
	}
	return max(1, f.seatsFunc())
}

// setSeats adopts n seats (0: no change) and, when the number changed,
// re-apportions them and admits the waiters that now fit. f.mu is held.
func (f *Scheduler) setSeats(n int) {
	if n > 0 && n != f.seats {
		f.seats = n
		f.apportion()
		f.dispatch()
	}
}

// apportion computes each level's nominal seats and reserve from f.seats.
// Nominal seats are rounded up, so that a level with a share always has a
// seat; reserves are rounded down, so that together they never hold every
// seat (one seat reserved 20% of is no reserve).
// f.mu is held (or f is not yet shared).
func (f *Scheduler) apportion() {
	total := 0
	for _, lv := range f.levels {
		if !lv.Exempt {
			total += lv.Shares
		}
	}
	f.protected = 0
	for _, lv := range f.levels {
		if lv.Exempt || total == 0 {
			continue
		}
		exact := float64(f.seats) * float64(lv.Shares) / float64(total)
		lv.nominal = int(math.Ceil(exact))
		lv.reserve = int(exact * float64(lv.Reserve) / 100)
		f.protected += max(0, lv.reserve-lv.inUse)
	}
}

// canTake reports whether lv may take a free seat now: there is one, and
// taking it leaves the unused reserves of the other levels untouched.
// f.mu is held.
func (f *Scheduler) canTake(lv *levelState) bool {
	free := f.seats - f.inUse
	others := f.protected - max(0, lv.reserve-lv.inUse)
	return free > others
}

// take gives lv a seat. f.mu is held.
func (f *Scheduler) take(lv *levelState) {
	f.protected -= max(0, lv.reserve-lv.inUse)
	lv.inUse++
	f.protected += max(0, lv.reserve-lv.inUse)
	f.inUse++
}

// free returns lv's seat. f.mu is held.
func (f *Scheduler) free(lv *levelState) {
	f.protected -= max(0, lv.reserve-lv.inUse)
	lv.inUse--
	f.protected += max(0, lv.reserve-lv.inUse)
	f.inUse--
}

// dispatch hands free seats to waiters: first to levels below their
// nominal seats, then to levels that borrow, each time to the highest
// priority level that can take one, within a level to the queue whose
// head has the earliest virtual finish time. f.mu is held.
//
// The clock is read only when a waiter is granted a seat, so that the
// uncontended path never reads it.
func (f *Scheduler) dispatch() {
	var now time.Time
	for f.queued > 0 && f.inUse < f.seats {
		lv := f.nextLevel()
		if lv == nil {
			return
		}
		wt := lv.dequeue()
		f.queued--
		f.take(lv)
		if now.IsZero() {
			now = time.Now()
		}
		wt.granted, wt.grantedAt = true, now
		close(wt.ready)
	}
}

// nextLevel returns the level the next free seat goes to, or nil.
func (f *Scheduler) nextLevel() *levelState {
	for _, lv := range f.levels {
		if lv.queued > 0 && lv.inUse < lv.nominal && f.canTake(lv) {
			return lv
		}
	}
	for _, lv := range f.levels {
		if lv.queued > 0 && f.canTake(lv) {
			return lv
		}
	}
	return nil
}

func (f *Scheduler) observe(e Event) {
	if f.obs != nil {
		f.obs.ObserveFair(e)
	}
}

// Stats is a snapshot of a Scheduler's state.
type Stats struct {
	Seats  int // current seats
	InUse  int // seats taken
	Queued int // requests waiting
}

// Stats returns a snapshot of f's state, for tests and dashboards.
func (f *Scheduler) Stats() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return Stats{Seats: f.seats, InUse: f.inUse, Queued: f.queued}
}
