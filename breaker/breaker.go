// Package breaker wraps a ratelimit.Store with a circuit breaker, so that a
// store that keeps failing (a dead Redis) stops costing requests its
// timeout: after enough consecutive failures the circuit opens and calls
// fail at once with ErrOpen, the rules apply their FailurePolicy, and after
// a cooldown a single probe finds out whether the store is back.
//
//	store := breaker.New(redisstore.New(client), breaker.Config{})
//	mw := ratelimit.New(ratelimit.PerMinute(100), ratelimit.ByIP(), ratelimit.WithStore(store))
package breaker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/stores"
)

// ErrOpen is the error of a call refused because the circuit is open (or
// half-open with its one probe in flight); the store was not called.
//
// ErrOpen wraps ratelimit.ErrStoreUnavailable, so for a refused call both
// errors.Is(err, ErrOpen) and errors.Is(err, ratelimit.ErrStoreUnavailable)
// hold, and a Limiter treats it as any other store outage: the rule's
// FailurePolicy applies. Every other error a Breaker returns is the store's
// own, unchanged, and does not match ErrOpen.
var ErrOpen = fmt.Errorf("%w: circuit open", ratelimit.ErrStoreUnavailable)

// State is the state of a Breaker.
type State uint32

// The states of a Breaker.
const (
	Closed   State = iota // calls go to the store
	Open                  // calls fail at once with ErrOpen
	HalfOpen              // one probe call goes to the store
)

// String returns "closed", "open" or "half-open".
func (s State) String() string {
	switch s {
	case Open:
		return "open"
	case HalfOpen:
		return "half-open"
	}
	return "closed"
}

// Config tunes a Breaker. Its zero value, and every zero field, takes the
// defaults.
type Config struct {
	// Failures is how many consecutive failures open the circuit; 5.
	Failures int
	// Cooldown is how long the circuit stays open before a probe; 1s. Each
	// failed probe doubles it, up to MaxCooldown.
	Cooldown time.Duration
	// MaxCooldown caps the cooldown; 30s.
	MaxCooldown time.Duration
	// Clock reads time; stores.SystemClock().
	Clock ratelimit.Clock
	// OnStateChange, if set, is called after every transition, for example
	// to log "fallback entered" and "fallback left". It must not block.
	OnStateChange func(from, to State)
}

// Breaker is a ratelimit.Store that stops calling a failing store. After Failures
// consecutive failures (errors other than invalid requests and the caller's
// own cancellation) it opens: calls return ErrOpen at once, without
// touching the store, so a dead Redis costs requests nothing and the rules'
// FailurePolicy applies. After Cooldown it lets a single probe through: a
// success closes it, a failure reopens it for twice as long.
//
// A Breaker is safe for concurrent use; a closed Breaker adds two atomic
// loads to each call. Its zero value is not usable; create one with New.
type Breaker struct {
	store ratelimit.Store
	cfg   Config

	state    atomic.Uint32 // State
	failures atomic.Int64  // consecutive failures while closed

	mu         sync.Mutex // guards the fields below and transitions
	openedAt   time.Time
	cooldown   time.Duration
	probing    bool
	probeGen   uint64    // the current probe; outcomes of older ones are ignored
	probeStart time.Time // a probe older than the cooldown is given up on
}

var _ ratelimit.Store = (*Breaker)(nil)

// New wraps store with a circuit breaker. It panics if store is nil.
func New(store ratelimit.Store, cfg Config) *Breaker {
	if store == nil {
		panic("ratelimit: breaker.New needs a store")
	}
	if cfg.Failures <= 0 {
		cfg.Failures = 5
	}
	if cfg.Cooldown <= 0 {
		cfg.Cooldown = time.Second
	}
	if cfg.MaxCooldown < cfg.Cooldown {
		cfg.MaxCooldown = max(cfg.Cooldown, 30*time.Second)
	}
	if cfg.Clock == nil {
		cfg.Clock = stores.SystemClock()
	}
	return &Breaker{store: store, cfg: cfg, cooldown: cfg.Cooldown}
}

// State returns the breaker's current state.
func (b *Breaker) State() State { return State(b.state.Load()) }

// Take calls the store unless the circuit is open.
func (b *Breaker) Take(ctx context.Context, req stores.Request) (ratelimit.Result, error) {
	gen, err := b.admit()
	if err != nil {
		return ratelimit.Result{}, err
	}
	res, err := b.store.Take(ctx, req)
	b.record(ctx, gen, err)
	return res, err
}

// TakeAll calls the store unless the circuit is open.
func (b *Breaker) TakeAll(ctx context.Context, reqs []stores.Request, results []ratelimit.Result) error {
	gen, err := b.admit()
	if err != nil {
		return err
	}
	err = b.store.TakeAll(ctx, reqs, results)
	b.record(ctx, gen, err)
	return err
}

// Return always calls the store, whatever the circuit's state, and its
// outcome does not count: a Concurrency slot or an undone unit taken while
// the circuit was closed must get back to the store that holds it.
func (b *Breaker) Return(ctx context.Context, req stores.Request) error {
	return b.store.Return(ctx, req)
}

// admit decides whether a call may reach the store. It returns the probe's
// generation for the half-open probe, and 0 for an ordinary call.
func (b *Breaker) admit() (gen uint64, err error) {
	if State(b.state.Load()) == Closed {
		return 0, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.cfg.Clock.Now()
	switch State(b.state.Load()) {
	case Closed:
		return 0, nil
	case Open:
		if now.Sub(b.openedAt) < b.cooldown {
			return 0, ErrOpen
		}
		b.transition(HalfOpen)
	}
	// One probe at a time; one that has not answered within a cooldown (a
	// hung store and a caller without a deadline) is given up on.
	if b.probing && now.Sub(b.probeStart) < b.cooldown {
		return 0, ErrOpen
	}
	b.probing, b.probeStart = true, now
	b.probeGen++
	return b.probeGen, nil
}

// record counts the outcome of a call that reached the store; gen is the
// probe's generation, or 0.
func (b *Breaker) record(ctx context.Context, gen uint64, err error) {
	cancelled := errors.Is(err, context.Canceled) && ctx.Err() == context.Canceled
	failed := err != nil && !errors.Is(err, ratelimit.ErrInvalidRequest) && !errors.Is(err, ratelimit.ErrInvalidLimit) && !cancelled
	probe := gen != 0
	if probe && cancelled {
		// The caller gave up: the store said nothing either way. Let the
		// next caller probe.
		b.mu.Lock()
		if gen == b.probeGen {
			b.probing = false
		}
		b.mu.Unlock()
		return
	}
	if !probe {
		if !failed {
			if b.failures.Load() != 0 {
				b.failures.Store(0)
			}
			return
		}
		if b.failures.Add(1) < int64(b.cfg.Failures) {
			return
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if probe {
		if gen != b.probeGen {
			return // an older probe, given up on
		}
		b.probing = false
		if !failed {
			b.failures.Store(0)
			b.cooldown = b.cfg.Cooldown
			b.transition(Closed)
			return
		}
		b.cooldown = min(2*b.cooldown, b.cfg.MaxCooldown)
	}
	if State(b.state.Load()) != Open {
		b.openedAt = b.cfg.Clock.Now()
		b.transition(Open)
	} else if probe {
		b.openedAt = b.cfg.Clock.Now()
	}
}

// transition moves to state to; b.mu is held.
func (b *Breaker) transition(to State) {
	from := State(b.state.Swap(uint32(to)))
	if from != to && b.cfg.OnStateChange != nil {
		b.cfg.OnStateChange(from, to)
	}
}
