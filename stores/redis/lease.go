package redisstore

import (
	"context"
	"sync"
	"time"

	"github.com/sluicehq/ratelimit/stores"
)

// Lease mode (WithLease): a GCRA key's units are taken from Redis a few at a
// time and spent locally. See WithLease for the accuracy bound.
//
// Why the bound holds: every unit admitted locally was consumed in Redis
// first, within the lease's lifetime before; and one Store holds at most
// one lease per key, of at most max(1, fraction×Capacity) units, fetched
// by one caller at a time (the others meanwhile check Redis directly, which
// is exact). So in any window the
// admitted units are at most the units Redis let through in the same window
// plus what the instances held leased at its start, and at most what Redis
// let through in the window stretched by one lifetime.

type lease struct {
	left     int    // units still to spend
	rem      int    // Redis's Remaining after the grant
	reset    int64  // Redis's ResetAfter after the grant, µs
	at       int64  // when the grant was requested, µs
	slot     uint64 // the key's time after the grant: the token of its takes
	expires  int64
	limit    stores.Limit
	fetching bool // a grant is in flight
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
func (s *Store) leaseSize(l stores.Limit) int {
	return min(l.Capacity(), max(1, int(s.leaseFrac*float64(l.Capacity()))))
}

// leaseTake serves a GCRA check of cost >= 1 at time t (µs) from the key's
// lease, or takes a new lease from Redis. When another caller's grant for
// the key is in flight it returns direct: the check should go to Redis on
// its own (coalesced with the others), exactly, rather than wait for the
// grant. So a check in lease mode makes one round trip at most, as in the
// default mode, and never waits for a chain of grants.
func (s *Store) leaseTake(ctx context.Context, now instant, req *stores.Request, t int64, cache bool) (res stores.Result, direct bool, err error) {
	k := cacheKey{req.Rule, req.Key, req.Algorithm}
	sh := &s.leases.shards[k.hash()%cacheShards]
	sh.mu.Lock()
	l := sh.m[k]
	if l == nil {
		if len(sh.m) >= s.leases.perShard {
			for k2, l2 := range sh.m { // drop an expired lease, or any idle one
				if !l2.fetching && (t >= l2.expires || len(sh.m) >= s.leases.perShard) {
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
		res := stores.Result{
			Allowed: true, Limit: req.Limit, Remaining: l.rem + l.left,
			ResetAfter: time.Duration(max(0, l.reset-(t-l.at))) * time.Microsecond,
			Slot:       l.slot,
		}
		sh.mu.Unlock()
		s.stats.leaseHits.Add(1)
		return res, false, nil
	}
	if l.fetching {
		sh.mu.Unlock()
		return stores.Result{}, true, nil
	}
	l.fetching = true
	sh.mu.Unlock()

	n := max(s.leaseSize(req.Limit), req.Cost)
	vals, err := s.check(ctx, now, req, opLease, n)
	if err != nil {
		sh.mu.Lock()
		l.fetching = false
		sh.mu.Unlock()
		return stores.Result{}, false, err
	}
	res = result(req.Limit, vals[:])
	granted := int(vals[0])
	if granted > 0 {
		res.Allowed = true
		res.Remaining += granted - req.Cost
		res.Slot = uint64(vals[4])
	}
	if cache {
		s.denied.observe(req, &res, t)
	}
	sh.mu.Lock()
	if granted > 0 {
		// Units left from an earlier lease (fewer than this cost) are
		// dropped: the limit is stricter by them, never looser.
		*l = lease{left: granted - req.Cost, rem: int(vals[1]), reset: vals[3], at: t, slot: res.Slot, expires: t + int64(s.leaseLife/time.Microsecond), limit: req.Limit}
	} else {
		l.left, l.fetching = 0, false
	}
	sh.mu.Unlock()
	return res, false, nil
}
