package redisstore

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
)

// TestLeaseHotKeyWithinBudget: 64 callers on four default-mode Stores and
// 64 callers on four lease-mode Stores, at the same time (so under the same
// load), each group on one hot key of its own, with a 50ms budget per call
// (scaled under -race). Lease mode causes no more budget errors than the
// default mode (a check never waits for another caller's grant: it asks
// Redis directly), and admits no more than the bound plus the documented
// lease overshoot.
func TestLeaseHotKeyWithinBudget(t *testing.T) {
	client := standaloneClient(t)
	l := ratelimit.PerSecond(200) // interval 5ms
	const (
		fraction = 0.05 // leases of 10 units
		lifetime = 100 * time.Millisecond
		callers  = 64
		duration = time.Second // the budget is real time, so is the run
	)
	budget := 50 * time.Millisecond
	if raceEnabled {
		budget *= 5
	}
	type outcome struct {
		admitted, budgetErrs, calls atomic.Int64
	}
	var modes [2]outcome // default, lease
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(duration)
	for m := range modes {
		prefix := uniquePrefix(t)
		o := &modes[m]
		for range 4 {
			opts := []Option{WithPrefix(prefix)}
			if m == 1 {
				opts = append(opts, WithLease(fraction, lifetime))
			}
			s := newStore(client, opts...)
			for range callers / 4 {
				wg.Go(func() {
					req := gcraReq("hot", l, 1)
					for time.Now().Before(end) {
						o.calls.Add(1)
						ctx, cancel := context.WithTimeout(context.Background(), budget)
						res, err := s.Take(ctx, req)
						cancel()
						switch {
						case errors.Is(err, context.DeadlineExceeded):
							o.budgetErrs.Add(1)
						case err != nil:
							t.Error(err)
							return
						case res.Allowed:
							o.admitted.Add(1)
						}
					}
				})
			}
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	def, lease := &modes[0], &modes[1]
	t.Logf("%v budget: default: %d of %d admitted, %d budget errors; lease: %d of %d admitted, %d budget errors; in %v",
		budget, def.admitted.Load(), def.calls.Load(), def.budgetErrs.Load(),
		lease.admitted.Load(), lease.calls.Load(), lease.budgetErrs.Load(), elapsed)

	// No more, within the noise: both modes meet the same scheduling noise,
	// which on a loaded machine reaches tens of errors either way (40 against
	// 5 was seen without -race); the defect this guards against caused
	// hundreds (934 in one second, against 0 for the default mode).
	if slack := 50 + def.budgetErrs.Load(); lease.budgetErrs.Load() > def.budgetErrs.Load()+slack {
		t.Errorf("lease mode: %d budget errors, default mode %d (+%d allowed)", lease.budgetErrs.Load(), def.budgetErrs.Load(), slack)
	}
	// The bound: the burst, the refill while the run lasted (on the
	// server's clock, read here within a millisecond), and the overshoot
	// of WithLease: 4 instances × 10 units, plus the refill during one
	// lifetime.
	refill := int64((elapsed + time.Millisecond) / l.Interval())
	overshoot := int64(4*10) + int64(lifetime/l.Interval())
	if bound := int64(l.Capacity()) + refill + overshoot; lease.admitted.Load() > bound {
		t.Errorf("lease mode admitted %d, bound %d (capacity %d + refill %d + overshoot %d)", lease.admitted.Load(), bound, l.Capacity(), refill, overshoot)
	}
}
