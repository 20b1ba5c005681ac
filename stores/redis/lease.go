package redisstore

import (
	"context"
	"sync"
	"time"

	"github.com/sluicehq/ratelimit"
)

// Lease mode (WithLease): a GCRA key's units are taken from Redis a few at a
// time and spent locally. See WithLease for the accuracy bound.
//
// Why the bound holds: every unit admitted locally was consumed in Redis
// first, within the lease's lifetime before; and one Store holds at most
// one lease per key, of at most max(1, fraction×Capacity) units, fetched
// by one caller at a time (the others wait for it). So in any window the
// admitted units are at most the units Redis let through in the same window
// plus what the instances held leased at its start, and at most what Redis
// let through in the window stretched by one lifetime.

type lease struct {
	left     int   // units still to spend
	rem      int   // Redis's Remaining after the grant
	reset    int64 // Redis's ResetAfter after the grant, µs
	at       int64 // when the grant was requested, µs
	expires  int64
	limit    ratelimit.Limit
	fetching chan struct{} // closed when the grant in flight lands
}

type leaseTable struct {
	perShard int
	shards   [cacheShards]struct {
		mu sync.Mutex
		m  map[cacheKey]*lease
		_  [40]byte
	}
}

func newLeaseTable(size int) *leaseTable {
	t := &leaseTable{perShard: max(1, (size+cacheShards-1)/cacheShards)}
	for i := range t.shards {
		t.shards[i].m = make(map[cacheKey]*lease)
	}
	return t
}

// leaseSize is the most units one grant takes for limit l.
func (s *Store) leaseSize(l ratelimit.Limit) int {
	return min(l.Capacity(), max(1, int(s.leaseFrac*float64(l.Capacity()))))
}

// leaseOutcome tells the caller of leaseTake what to do next.
type leaseOutcome uint8

const (
	leaseDone   leaseOutcome = iota // the result (or error) is final
	leaseAgain                      // a grant landed: read the time again and retry
	leaseDirect                     // another grant is in flight: ask Redis directly
)

// leaseTake serves a GCRA check of cost >= 1 at time t (µs) from the key's
// lease, or takes a new lease from Redis. It returns leaseAgain when it
// waited for another caller's grant: the caller should then read the time
// again (the grant was requested after t), consult the denied cache (which
// the grant's answer updated, when cache is set) and retry with mayWait
// false. A call that may not wait and finds a grant in flight gets
// leaseDirect: so a check waits for at most one grant, never for a chain
// of them.
func (s *Store) leaseTake(ctx context.Context, now instant, req *ratelimit.Request, t int64, cache, mayWait bool) (ratelimit.Result, leaseOutcome, error) {
	k := cacheKey{req.Rule, req.Key, req.Algorithm}
	sh := &s.leases.shards[k.hash()%cacheShards]
	for {
		sh.mu.Lock()
		l := sh.m[k]
		if l == nil {
			if len(sh.m) >= s.leases.perShard {
				for k2, l2 := range sh.m { // drop an expired lease, or any idle one
					if l2.fetching == nil && (t >= l2.expires || len(sh.m) >= s.leases.perShard) {
						delete(sh.m, k2)
						break
					}
				}
			}
			l = &lease{}
			sh.m[k] = l
		}
		if l.left >= req.Cost && l.limit == req.Limit && t >= l.at && t < l.expires {
			l.left -= req.Cost
			res := ratelimit.Result{
				Allowed: true, Limit: req.Limit, Remaining: l.rem + l.left,
				ResetAfter: time.Duration(max(0, l.reset-(t-l.at))) * time.Microsecond,
			}
			sh.mu.Unlock()
			s.stats.leaseHits.Add(1)
			return res, leaseDone, nil
		}
		if ch := l.fetching; ch != nil {
			sh.mu.Unlock()
			if !mayWait {
				return ratelimit.Result{}, leaseDirect, nil
			}
			select {
			case <-ch:
				return ratelimit.Result{}, leaseAgain, nil
			case <-ctx.Done():
				return ratelimit.Result{}, leaseDone, wrapCtx(ctx.Err())
			}
		}
		ch := make(chan struct{})
		l.fetching = ch
		sh.mu.Unlock()

		n := max(s.leaseSize(req.Limit), req.Cost)
		vals, err := s.check(ctx, now, req, opLease, n)

		if err != nil {
			sh.mu.Lock()
			l.fetching = nil
			close(ch)
			sh.mu.Unlock()
			return ratelimit.Result{}, leaseDone, err
		}
		res := result(req.Limit, vals[:])
		granted := int(vals[0])
		if granted > 0 {
			res.Allowed = true
			res.Remaining += granted - req.Cost
		}
		if cache {
			s.denied.observe(req, &res, t) // before the waiters wake
		}
		sh.mu.Lock()
		l.fetching = nil
		close(ch)
		if granted > 0 {
			// Units left from an earlier lease (fewer than this cost) are
			// dropped: the limit is stricter by them, never looser.
			*l = lease{left: granted - req.Cost, rem: int(vals[1]), reset: vals[3], at: t, expires: t + int64(s.leaseLife/time.Microsecond), limit: req.Limit}
		} else {
			l.left = 0
		}
		sh.mu.Unlock()
		return res, leaseDone, nil
	}
}
