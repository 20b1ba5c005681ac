package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// ErrCircuitOpen is returned by a Breaker while it stops calling its store.
// It wraps ErrStoreUnavailable, so rules apply their FailurePolicy.
var ErrCircuitOpen = fmt.Errorf("%w: circuit open", ErrStoreUnavailable)

// BreakerState is the state of a Breaker.
type BreakerState uint32

// The states of a Breaker.
const (
	BreakerClosed   BreakerState = iota // calls go to the store
	BreakerOpen                         // calls fail at once with ErrCircuitOpen
	BreakerHalfOpen                     // one probe call goes to the store
)

func (s BreakerState) String() string {
	switch s {
	case BreakerOpen:
		return "open"
	case BreakerHalfOpen:
		return "half-open"
	}
	return "closed"
}

// BreakerConfig tunes a Breaker. Zero fields take the defaults.
type BreakerConfig struct {
	// Failures is how many consecutive failures open the circuit; 5.
	Failures int
	// Cooldown is how long the circuit stays open before a probe; 1s. Each
	// failed probe doubles it, up to MaxCooldown.
	Cooldown time.Duration
	// MaxCooldown caps the cooldown; 30s.
	MaxCooldown time.Duration
	// Clock reads time; SystemClock.
	Clock Clock
	// OnStateChange, if set, is called after every transition, for example
	// to log "fallback entered" and "fallback left". It must not block.
	OnStateChange func(from, to BreakerState)
}

// Breaker is a Store that stops calling a failing store. After Failures
// consecutive failures (errors other than invalid requests and the caller's
// own cancellation) it opens: calls return ErrCircuitOpen at once, without
// touching the store, so a dead Redis costs requests nothing and the rules'
// FailurePolicy applies. After Cooldown it lets a single probe through: a
// success closes it, a failure reopens it for twice as long.
//
// A Breaker is safe for concurrent use; a closed Breaker adds two atomic
// loads to each call. Create one with NewBreaker.
type Breaker struct {
	store Store
	cfg   BreakerConfig

	state    atomic.Uint32 // BreakerState
	failures atomic.Int64  // consecutive failures while closed

	mu         sync.Mutex // guards the fields below and transitions
	openedAt   time.Time
	cooldown   time.Duration
	probing    bool
	probeGen   uint64    // the current probe; outcomes of older ones are ignored
	probeStart time.Time // a probe older than the cooldown is given up on
}

var _ Store = (*Breaker)(nil)

// NewBreaker wraps store with a circuit breaker.
func NewBreaker(store Store, cfg BreakerConfig) *Breaker {
	if store == nil {
		panic("ratelimit: NewBreaker(nil)")
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
		cfg.Clock = SystemClock()
	}
	return &Breaker{store: store, cfg: cfg, cooldown: cfg.Cooldown}
}

// State returns the breaker's current state.
func (b *Breaker) State() BreakerState { return BreakerState(b.state.Load()) }

// Take calls the store unless the circuit is open.
func (b *Breaker) Take(ctx context.Context, req Request) (Result, error) {
	gen, err := b.admit()
	if err != nil {
		return Result{}, err
	}
	res, err := b.store.Take(ctx, req)
	b.record(ctx, gen, err)
	return res, err
}

// TakeAll calls the store unless the circuit is open.
func (b *Breaker) TakeAll(ctx context.Context, reqs []Request, results []Result) error {
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
func (b *Breaker) Return(ctx context.Context, req Request) error {
	return b.store.Return(ctx, req)
}

// admit decides whether a call may reach the store. It returns the probe's
// generation for the half-open probe, and 0 for an ordinary call.
func (b *Breaker) admit() (gen uint64, err error) {
	if BreakerState(b.state.Load()) == BreakerClosed {
		return 0, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.cfg.Clock.Now()
	switch BreakerState(b.state.Load()) {
	case BreakerClosed:
		return 0, nil
	case BreakerOpen:
		if now.Sub(b.openedAt) < b.cooldown {
			return 0, ErrCircuitOpen
		}
		b.transition(BreakerHalfOpen)
	}
	// One probe at a time; one that has not answered within a cooldown (a
	// hung store and a caller without a deadline) is given up on.
	if b.probing && now.Sub(b.probeStart) < b.cooldown {
		return 0, ErrCircuitOpen
	}
	b.probing, b.probeStart = true, now
	b.probeGen++
	return b.probeGen, nil
}

// record counts the outcome of a call that reached the store; gen is the
// probe's generation, or 0.
func (b *Breaker) record(ctx context.Context, gen uint64, err error) {
	cancelled := errors.Is(err, context.Canceled) && ctx.Err() == context.Canceled
	failed := err != nil && !errors.Is(err, ErrInvalidRequest) && !errors.Is(err, ErrInvalidLimit) && !cancelled
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
			b.transition(BreakerClosed)
			return
		}
		b.cooldown = min(2*b.cooldown, b.cfg.MaxCooldown)
	}
	if BreakerState(b.state.Load()) != BreakerOpen {
		b.openedAt = b.cfg.Clock.Now()
		b.transition(BreakerOpen)
	} else if probe {
		b.openedAt = b.cfg.Clock.Now()
	}
}

// transition moves to state to; b.mu is held.
func (b *Breaker) transition(to BreakerState) {
	from := BreakerState(b.state.Swap(uint32(to)))
	if from != to && b.cfg.OnStateChange != nil {
		b.cfg.OnStateChange(from, to)
	}
}
