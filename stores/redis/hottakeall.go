package redisstore

import (
	"context"

	"github.com/sluicehq/ratelimit/stores"
)

// TakeAll over a split key: its parts live in other slots than the key, so
// such a TakeAll takes one request at a time and, when one is denied or
// fails, returns what the others took: compensated, as a TakeAll across
// Cluster slots is (see takeAllGroups).

// splitIn reports whether one of reqs names a key this Store has split.
func (s *Store) splitIn(now instant, reqs []stores.Request) bool {
	if s.hot == nil || s.hot.cfg.Mode != HotSplit {
		return false
	}
	if _, ok := s.cacheTime(now); !ok {
		return false
	}
	for i := range reqs {
		if !splittable(&reqs[i]) {
			continue
		}
		if e := s.hot.lookup(cacheKey{reqs[i].Rule, reqs[i].Key, reqs[i].Algorithm}); e != nil && e.split.Load() != nil {
			return true
		}
	}
	return false
}

// splittable reports whether req may name a split key: a GCRA request
// without an explicit Window, a peek (cost 0) included, which Take answers
// from the parts (splitPeek).
func splittable(req *stores.Request) bool {
	return req.Algorithm == stores.GCRA && req.Window == (stores.Window{})
}

// unlessMarked returns err, or, when a request was denied by a split
// marker (so nothing was consumed, or it was given back), the TakeAll
// made again one request at a time, following the split.
func (s *Store) unlessMarked(ctx context.Context, now instant, reqs []stores.Request, results []stores.Result, err error) error {
	if err != nil || s.hot == nil || s.hot.cfg.Mode != HotSplit {
		return err
	}
	for i := range results {
		if isMarker(&results[i]) && splittable(&reqs[i]) {
			return s.takeAllEach(ctx, now, reqs, results)
		}
	}
	return nil
}

// takeAllEach takes reqs one at a time. When one is denied or fails, the
// units the earlier ones took are returned, they report Allowed, and the
// later ones are not checked: they report Allowed with their Limit only.
func (s *Store) takeAllEach(ctx context.Context, now instant, reqs []stores.Request, results []stores.Result) error {
	for i := range reqs {
		res, err := s.take(ctx, now, reqs[i])
		if err == nil && res.Allowed {
			results[i] = res
			continue
		}
		back := make([]stores.Request, i)
		for j := range back {
			back[j] = reqs[j]
			back[j].Slot = results[j].Slot
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), compensationTimeout)
		for j := range back {
			_ = s.ret(cctx, now, back[j]) // a failure leaves the units consumed: an over-count
		}
		cancel()
		if err != nil {
			return err
		}
		results[i] = res
		for j := i + 1; j < len(reqs); j++ {
			results[j] = stores.Result{Allowed: true, Limit: reqs[j].Limit}
		}
		return nil
	}
	return nil
}
