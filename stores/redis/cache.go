package redisstore

import (
	"hash/maphash"
	"sync"
	"time"

	"github.com/sluicehq/ratelimit/stores"
)

// The denied cache remembers keys that Redis denied with nothing left, and
// answers their checks locally until one unit is available again.
//
// Why it is exact: when a check is denied with Remaining 0, no check of
// cost 1 or more can consume anything from that key until one unit refills,
// at a time fixed by the state Redis holds; the state therefore only ages
// until then, and every Result Redis would give before it is a function of
// the elapsed time: GCRA's RetryAfter and ResetAfter count down (RetryAfter
// for cost c is the cached one plus (c-c0) intervals), a window's too. Only
// a refund can make a key allowed sooner: a Return through this Store drops
// the key from the cache, but a Return on another instance cannot, so this
// instance may keep denying the key until the cached time (the only
// inexactness, and only with refunds).
//
// Times are microseconds on the Store's clock (WithClock), or on the local
// monotonic clock with server time. The cached time of a denial is when its
// request was sent, which is no later than when Redis decided: the cache
// never denies longer than Redis would, and may report RetryAfter up to one
// round trip shorter.
//
// Which checks are served: GCRA and FixedWindow checks of any cost >= 1 for
// the same Limit (and Window); SlidingWindow and SlidingLog checks of cost
// 1 after a denial of cost 1 (their RetryAfter for other costs depends on
// state the denial does not reveal). Concurrency is never cached: slots come back by
// Return, at any time. Cost-0 peeks always go to Redis.

type cacheKey struct {
	rule, key string
	alg       stores.Algorithm
}

func (k *cacheKey) hash() uint64 {
	return maphash.String(laneSeed, k.key) ^ maphash.String(laneSeed, k.rule)
}

type deniedEntry struct {
	at, until int64 // µs: when the denial's request was sent; when one unit is back
	cost      int   // the cost of the denied request
	interval  int64 // GCRA: the refill interval in µs
	retry     int64 // µs, at time at
	reset     int64
	limit     stores.Limit
	window    stores.Window
}

const cacheShards = 64

type deniedCache struct {
	perShard int
	shards   [cacheShards]struct {
		mu sync.Mutex
		m  map[cacheKey]deniedEntry
		_  [40]byte // keep shards on separate cache lines
	}
}

func newDeniedCache(size int) *deniedCache {
	c := &deniedCache{perShard: max(1, (size+cacheShards-1)/cacheShards)}
	for i := range c.shards {
		c.shards[i].m = make(map[cacheKey]deniedEntry)
	}
	return c
}

// get returns the cached denial of req at time now (µs), if there is one.
func (c *deniedCache) get(req *stores.Request, now int64) (stores.Result, bool) {
	k := cacheKey{req.Rule, req.Key, req.Algorithm}
	sh := &c.shards[k.hash()%cacheShards]
	sh.mu.Lock()
	e, ok := sh.m[k]
	if ok && now >= e.until {
		delete(sh.m, k)
		ok = false
	}
	sh.mu.Unlock()
	if !ok || now < e.at || e.limit != req.Limit || e.window != req.Window {
		return stores.Result{}, false
	}
	el := now - e.at
	retry := e.retry - el
	switch req.Algorithm {
	case stores.GCRA:
		retry += int64(req.Cost-e.cost) * e.interval
	case stores.SlidingWindow, stores.SlidingLog:
		if req.Cost != e.cost {
			return stores.Result{}, false
		}
	}
	return stores.Result{
		Limit:      req.Limit,
		RetryAfter: time.Duration(retry) * time.Microsecond,
		ResetAfter: time.Duration(max(0, e.reset-el)) * time.Microsecond,
	}, true
}

// observe records Redis's answer res to req, whose request was sent at
// sent (µs): a denial with nothing left is remembered, any other answer
// forgets the key.
func (c *deniedCache) observe(req *stores.Request, res *stores.Result, sent int64) {
	k := cacheKey{req.Rule, req.Key, req.Algorithm}
	sh := &c.shards[k.hash()%cacheShards]
	if res.Allowed || res.Remaining != 0 || req.Cost < 1 || res.RetryAfter >= markerWait {
		sh.mu.Lock()
		if len(sh.m) > 0 {
			delete(sh.m, k)
		}
		sh.mu.Unlock()
		return
	}
	e := deniedEntry{
		at: sent, cost: req.Cost, limit: req.Limit, window: req.Window,
		retry: int64(res.RetryAfter / time.Microsecond), reset: int64(res.ResetAfter / time.Microsecond),
	}
	wait := e.retry // until one unit is back
	switch req.Algorithm {
	case stores.GCRA:
		e.interval = gcraInterval(req.Limit)
		wait -= int64(req.Cost-1) * e.interval
	case stores.SlidingWindow, stores.SlidingLog:
		if req.Cost != 1 {
			return
		}
	}
	if wait <= 0 {
		return
	}
	e.until = sent + wait
	sh.mu.Lock()
	if _, ok := sh.m[k]; !ok && len(sh.m) >= c.perShard {
		evict(sh.m, sent)
	}
	sh.m[k] = e
	sh.mu.Unlock()
}

// forget drops req's key, after a Return.
func (c *deniedCache) forget(req *stores.Request) {
	k := cacheKey{req.Rule, req.Key, req.Algorithm}
	sh := &c.shards[k.hash()%cacheShards]
	sh.mu.Lock()
	if len(sh.m) > 0 {
		delete(sh.m, k)
	}
	sh.mu.Unlock()
}

// evict makes room in a full shard: it drops expired entries among the
// first few it meets, or else one arbitrary entry (map order is random).
// Losing an entry costs one round trip later, never a wrong answer.
func evict(m map[cacheKey]deniedEntry, now int64) {
	var victim cacheKey
	seen, freed := 0, false
	for k, e := range m {
		if seen == 0 {
			victim = k
		}
		if now >= e.until {
			delete(m, k)
			freed = true
		}
		if seen++; seen == 8 {
			break
		}
	}
	if !freed {
		delete(m, victim)
	}
}

// cacheTime returns the time of a call at now in the denied cache's and the
// leases' microseconds, or false when they cannot be used: an explicit time
// on a Store with server time, which has no common scale with the local
// clock.
func (s *Store) cacheTime(now instant) (int64, bool) {
	if s.clock != nil {
		return now.us, true
	}
	if now.set {
		return 0, false
	}
	return int64(time.Since(s.epoch) / time.Microsecond), true
}
