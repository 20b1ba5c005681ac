package redisstore

import (
	"context"
	"time"

	"github.com/sluicehq/ratelimit/stores"
)

// The check path of hot keys: Store.take calls hotTake first for every
// eligible request when WithHotKeys is on, and adopt when the main key
// answers with a split marker.

func (s *Store) hotCfg() *HotKeys { return &s.hot.cfg }

// hotTake counts a check and serves it if its key is hot. done false: the
// check takes the ordinary path.
func (s *Store) hotTake(ctx context.Context, now instant, req *stores.Request, t int64) (stores.Result, bool, error) {
	d := s.hot
	k := cacheKey{req.Rule, req.Key, req.Algorithm}
	e := d.lookup(k)
	if e == nil {
		var events []HotKeyEvent
		e, events = d.observe(k, t)
		if e != nil && d.cfg.Mode == HotSplit {
			ok, err := s.promote(ctx, now, req, e, t)
			if ok {
				events[len(events)-1].Shards = e.split.Load().n
			}
			if err != nil {
				d.report(events)
				return stores.Result{}, true, err // the rule's failure policy applies
			}
		}
		d.report(events)
		if e == nil {
			return stores.Result{}, false, nil
		}
	}
	if t >= d.winEnd.Load() { // windows end on hot keys' checks too
		d.report(d.rollover(t))
		if e = d.lookup(k); e == nil {
			return stores.Result{}, false, nil // demoted (a lease)
		}
	}
	e.checks.Add(1)
	if d.cfg.Mode == HotLease {
		res, direct, err := s.leaseTake(ctx, now, req, t, s.denied != nil)
		return res, !direct, err
	}
	if sp := e.split.Load(); sp != nil {
		return s.splitTake(ctx, now, req, e, sp, t)
	}
	return stores.Result{}, false, nil
}

// adopt follows another Store's split of req's key, whose main key denied
// with a marker: it reads the marker and serves the check from the parts.
// While the split is being set up, or when the marker cannot be read, the
// check is denied with a short RetryAfter (the main key admits nothing
// meanwhile); a limit too small to divide in the marker's parts is denied
// with the marker's time left (canFollow).
func (s *Store) adopt(ctx context.Context, now instant, req *stores.Request, t int64, marked stores.Result) (stores.Result, error) {
	short := stores.Result{Limit: req.Limit, RetryAfter: time.Millisecond, ResetAfter: time.Millisecond}
	if s.hot == nil || s.hot.cfg.Mode != HotSplit || !hotEligible(req) || shaped(req) {
		marked.Limit = req.Limit
		return marked, nil // a Store without split mode, or a reservation: the key stays denied
	}
	bctx, cancel := s.hotBudget(ctx)
	defer cancel()
	sent := s.hotNow(t, now)
	n, left, err := s.readMarker(bctx, now, stateKey(s.prefix, req))
	if err != nil || n < 2 {
		return short, nil
	}
	if !canFollow(req.Limit, n) { // denied while the marker lives: no longer
		return stores.Result{Limit: req.Limit, RetryAfter: left, ResetAfter: left}, nil
	}
	k := cacheKey{req.Rule, req.Key, req.Algorithm}
	if e := s.hot.lookup(k); e != nil {
		if sp := e.split.Load(); sp != nil && sp.n == n && sp.limit == req.Limit {
			s.activate(sp, sent, left) // another caller adopted it meanwhile
			return s.followSplit(ctx, now, req, e, sp, t)
		}
	}
	sp := newSplitKey(s.prefix, req, n)
	s.activate(sp, sent, left)
	e := &hotEntry{key: k, since: s.hot.winSeq.Load()}
	e.split.Store(sp)
	s.hot.mu.Lock()
	s.hot.put(k, e)
	s.hot.mu.Unlock()
	s.hot.report([]HotKeyEvent{{Rule: k.rule, Key: k.key, Hot: true, Mode: HotSplit, Shards: n, Adopted: true}})
	return s.followSplit(ctx, now, req, e, sp, t)
}

// canFollow reports whether a Store whose limit is l can follow a split
// in n parts: the marker's n, whatever this Store's Shards and l would
// give (another configuration during a rollout), as long as l divides into
// n parts of at least one unit of rate and capacity each (splitLimits).
// Each Store then takes from the same parts with its own share of its own
// limit, as Stores with two limits for one unsplit key each apply theirs.
func canFollow(l stores.Limit, n int) bool {
	return n >= 2 && n <= maxSplitShards && min(l.Rate, l.Capacity()) >= n
}

// followSplit serves an adopted check from the parts, or denies it shortly
// when they may not be used (the marker runs out).
func (s *Store) followSplit(ctx context.Context, now instant, req *stores.Request, e *hotEntry, sp *splitKey, t int64) (stores.Result, error) {
	e.checks.Add(1)
	res, done, err := s.splitTake(ctx, now, req, e, sp, t)
	if !done {
		return stores.Result{Limit: req.Limit, RetryAfter: time.Millisecond, ResetAfter: time.Millisecond}, nil
	}
	return res, err
}

// hotReturn routes a Return of a split key to one of its parts.
func (s *Store) hotReturn(ctx context.Context, now instant, req *stores.Request) (bool, error) {
	if s.hot == nil || !hotEligible(req) {
		return false, nil
	}
	e := s.hot.lookup(cacheKey{req.Rule, req.Key, req.Algorithm})
	if e == nil {
		return false, nil
	}
	sp := e.split.Load()
	if sp == nil || sp.limit != req.Limit {
		return false, nil
	}
	return true, s.splitReturn(ctx, now, req, sp)
}

// splitPeek answers a cost-0 check of a split key with the sum of its
// parts' Remaining and the latest of their ResetAfter.
func (s *Store) splitPeek(ctx context.Context, now instant, req *stores.Request, marked stores.Result) (stores.Result, error) {
	if s.hot.cfg.Mode != HotSplit || !splittable(req) {
		marked.Limit = req.Limit
		return marked, nil
	}
	bctx, cancel := s.hotBudget(ctx)
	defer cancel()
	n, _, err := s.readMarker(bctx, now, stateKey(s.prefix, req))
	if err != nil || n < 2 || !canFollow(req.Limit, n) {
		return stores.Result{Limit: req.Limit, RetryAfter: time.Millisecond}, err
	}
	sp := newSplitKey(s.prefix, req, n)
	res := stores.Result{Allowed: true, Limit: req.Limit}
	for i, k := range sp.keys {
		sub := *req
		sub.Limit = sp.limits[i]
		vals, err := s.checkKey(ctx, now, k, &sub, opTake, 0)
		if err != nil {
			return stores.Result{}, err
		}
		r := takeResult(&sub, vals[:])
		res.Remaining += r.Remaining
		res.ResetAfter = max(res.ResetAfter, r.ResetAfter)
	}
	return res, nil
}

// settleSplit charges a forced take (a settlement) of a split key, which
// its main key's marker refused, to one of the key's parts: only the parts'
// sum counts, as for splitReturn. When the parts cannot be followed the
// marker's denial stands (nothing is charged).
func (s *Store) settleSplit(ctx context.Context, now instant, req *stores.Request, marked stores.Result) (stores.Result, error) {
	marked.Limit = req.Limit
	if s.hot.cfg.Mode != HotSplit || !splittable(req) {
		return marked, nil
	}
	bctx, cancel := s.hotBudget(ctx)
	defer cancel()
	n, _, err := s.readMarker(bctx, now, stateKey(s.prefix, req))
	if err != nil {
		return stores.Result{}, err
	}
	if n < 2 || !canFollow(req.Limit, n) {
		return marked, nil
	}
	sp := newSplitKey(s.prefix, req, n)
	i := int(s.calls.Add(1) % uint64(n))
	sub := *req
	sub.Limit = sp.limits[i]
	vals, err := s.checkKey(ctx, now, sp.keys[i], &sub, opTake, 0)
	if err != nil {
		return stores.Result{}, err
	}
	r := takeResult(&sub, vals[:])
	r.Limit, r.Remaining = req.Limit, r.Remaining*req.Limit.Capacity()/sp.limits[i].Capacity()
	return r, nil
}
