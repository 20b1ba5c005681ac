package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/ratelimit/stores"
)

// splitKey is the layout and local state of a key split in n parts. Part i
// is the GCRA key <prefix>{<tag>%H<j>}:g:<rule>, where tag is the key's
// own hash tag and j the smallest number whose tag hashes into the middle
// half of the i-th of n equal ranges of Cluster slots: every Store computes
// the same parts, and with the usual layout (each primary owning one
// contiguous range, as redis-cli --cluster create makes them) the parts of
// n = number of primaries land on distinct primaries. No escaped key
// contains "%H" (a '%' in a tag is always followed by "25" or "7D"), so a
// part's key is never a user key's.
type splitKey struct {
	n      int
	limit  stores.Limit
	limits []stores.Limit
	keys   []string
	main   string
	tau    int64   // the main key's tau (interval × capacity), µs
	taus   []int64 // each part's

	next      atomic.Uint32  // round robin over the parts
	denied    []atomic.Int64 // per part: locally known empty until (cache µs)
	until     atomic.Int64   // use the parts before this (cache µs)
	refreshAt atomic.Int64
	busy      atomic.Bool // a refresh or demotion in flight
}

func newSplitKey(prefix string, req *stores.Request, n int) *splitKey {
	sp := &splitKey{n: n, limit: req.Limit, limits: splitLimits(req.Limit, n),
		main: stateKey(prefix, req), denied: make([]atomic.Int64, n)}
	sp.tau = gcraInterval(req.Limit) * int64(req.Limit.Capacity())
	sp.keys = splitPartKeys(prefix, sp.main, req.Rule, n)
	for i := range n {
		sp.taus = append(sp.taus, gcraInterval(sp.limits[i])*int64(sp.limits[i].Capacity()))
	}
	return sp
}

// splitPartKeys returns the Redis keys of the n parts of the main key main
// of rule: see splitKey.
func splitPartKeys(prefix, main, rule string, n int) []string {
	keys := make([]string, 0, n)
	tag := hashTag(main)
	width := 16384 / n
	for i := range n {
		lo, hi := i*width+width/4, (i+1)*width-width/4
		for j := 0; ; j++ {
			t := tag + "%H" + strconv.Itoa(j)
			if sl := int(crc16(t) % 16384); sl >= lo && sl < hi {
				var b strings.Builder
				b.WriteString(prefix)
				b.WriteByte('{')
				b.WriteString(t)
				b.WriteString("}:g:")
				b.WriteString(rule)
				keys = append(keys, b.String())
				break
			}
		}
	}
	return keys
}

// resetSplit is Reset of a GCRA key that is split: the marker stays and
// the parts are deleted, so that every Store keeps using the parts, now
// full (together the key's capacity). It reports false when the key holds
// no active marker (or it cannot be read): Reset then deletes the key. A marker that
// expires between the two steps leaves the key as its demotion made it:
// Reset then only resets the abandoned parts (the key is not refilled).
func (s *Store) resetSplit(ctx context.Context, req *stores.Request) (bool, error) {
	main := stateKey(s.prefix, req)
	n, _, err := s.readMarker(ctx, s.now(), main)
	if err != nil || n < 2 || n > maxSplitShards { // an error: the DEL reports it
		return false, nil
	}
	for _, k := range append(splitPartKeys(s.prefix, main, req.Rule, n), holesKey(main)) {
		if err := s.bounded(ctx, func() error { return s.client.Del(ctx, k).Err() }); err != nil { // parts are in other slots: one at a time
			return true, fmt.Errorf("ratelimit: redis: reset: %w", err)
		}
	}
	if s.hot != nil {
		if e := s.hot.lookup(cacheKey{req.Rule, req.Key, req.Algorithm}); e != nil {
			if sp := e.split.Load(); sp != nil {
				for i := range sp.denied {
					sp.denied[i].Store(0)
				}
			}
		}
	}
	return true, nil
}

// promote splits e's key: the protocol's set-up, one parallel round of
// empties, and activation (hotmarker.go). It reports whether the key is
// split. A Redis error after the set-up marker was set undoes it (op "u":
// the marker, if still being set up, becomes an empty bucket, as a
// demotion leaves it) and is returned, so that the check meets the rule's
// failure policy instead of a denial for the set-up marker's whole life;
// only when the undo fails too does the set-up marker deny the key until
// it expires. Either way the Store does not try again until the key has
// been demoted and found hot anew.
func (s *Store) promote(ctx context.Context, now instant, req *stores.Request, e *hotEntry, t int64) (bool, error) {
	n := splitShards(req.Limit, s.hot.cfg.Shards)
	if n == 0 {
		return false, nil
	}
	sp := newSplitKey(s.prefix, req, n)
	ctx, cancel := s.hotBudget(ctx)
	defer cancel()
	if _, err := s.runMarker(ctx, "p", now, sp); err != nil {
		return false, fmt.Errorf("ratelimit: redis: split: %w", err)
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, k := range sp.keys {
		wg.Go(func() { errs[i] = s.emptyPart(ctx, now, k, sp.taus[i]) })
	}
	wg.Wait()
	err := errors.Join(errs...)
	var ttl int64
	sent := s.hotNow(t, now)
	if err == nil {
		ttl, err = s.runMarker(ctx, "a", now, sp)
	}
	if err != nil {
		// A new budget: the failed step may have used this one up.
		uctx, ucancel := s.hotBudget(ctx)
		defer ucancel()
		_, _ = s.runMarker(uctx, "u", now, sp) // an active marker (an "a" whose reply was lost) stays
		return false, fmt.Errorf("ratelimit: redis: split: %w", err)
	}
	if ttl <= 0 {
		return false, nil // the set-up marker expired or was replaced: the main key decides
	}
	s.activate(sp, sent, time.Duration(ttl)*time.Millisecond)
	e.split.Store(sp)
	return true, nil
}

// activate records that the marker lives ttl after sent (cache µs).
func (s *Store) activate(sp *splitKey, sent int64, ttl time.Duration) {
	sp.until.Store(sent + (ttl - s.timeout).Microseconds())
	sp.refreshAt.Store(sent + s.hotCfg().Window.Microseconds())
}

// hotNow is the cache time of now: t for a call at the Store's own time.
func (s *Store) hotNow(t int64, now instant) int64 {
	if now.set {
		return now.us
	}
	return max(t, int64(time.Since(s.epoch)/time.Microsecond))
}

// splitTake serves a check of a split key: it takes from one part, and on
// a denial from a second one; parts known to be empty are skipped. It
// returns done false when the key is no longer split (demoted): the check
// then goes to the main key.
func (s *Store) splitTake(ctx context.Context, now instant, req *stores.Request, e *hotEntry, sp *splitKey, t int64) (stores.Result, bool, error) {
	if sp.limit != req.Limit {
		return stores.Result{}, false, nil // another limit: the main key decides
	}
	if !s.keepSplit(ctx, now, e, sp, t) {
		return stores.Result{}, false, nil
	}
	start := int(sp.next.Add(1))
	deny := stores.Result{Limit: req.Limit, RetryAfter: -1}
	tried := 0
	var failed error // the last part's error, while no part has answered
	for k := 0; k < sp.n && tried < 2; k++ {
		i := (start + k) % sp.n
		if until := sp.denied[i].Load(); t < until {
			deny = worse(deny, time.Duration(until-t)*time.Microsecond, 0)
			continue
		}
		// A call is sent only before the time to stop using the parts,
		// measured now: the refresh and a first part may have taken
		// most of a budget each since t.
		if s.hotNow(t, now) >= sp.until.Load() {
			if tried == 0 && failed == nil {
				return stores.Result{}, false, nil // the main key decides
			}
			break
		}
		sub := *req
		sub.Limit = sp.limits[i]
		vals, err := s.checkKey(ctx, now, sp.keys[i], &sub, opTake, 0)
		if err != nil {
			// A part's primary is down: another part answers for the
			// key (any part will do); the error stands only if none
			// does, so that the rule's failure policy applies.
			if failed = err; ctx.Err() != nil {
				break
			}
			continue
		}
		tried++
		r := takeResult(&sub, vals[:])
		if r.Allowed {
			r.Limit, r.Remaining = req.Limit, r.Remaining*req.Limit.Capacity()/sp.limits[i].Capacity()
			return r, true, nil
		}
		if r.Remaining == 0 {
			wait := r.RetryAfter.Microseconds() - int64(req.Cost-1)*gcraInterval(sp.limits[i])
			if wait > 0 {
				sp.denied[i].Store(t + wait)
			}
		}
		deny = worse(deny, r.RetryAfter, r.ResetAfter)
	}
	if tried == 0 && failed != nil {
		return stores.Result{}, true, failed
	}
	deny.RetryAfter = max(0, deny.RetryAfter)
	return deny, true, nil
}

// worse folds a part's denial into d: the soonest retry, the latest reset.
func worse(d stores.Result, retry, reset time.Duration) stores.Result {
	if d.RetryAfter < 0 || retry < d.RetryAfter {
		d.RetryAfter = retry
	}
	d.ResetAfter = max(d.ResetAfter, reset)
	return d
}

// keepSplit refreshes the marker once per window while the key is hot,
// and past the time the parts may be used, demotes the key or follows
// another Store's refresh. It reports whether the parts may be used now.
func (s *Store) keepSplit(ctx context.Context, now instant, e *hotEntry, sp *splitKey, t int64) bool {
	if t < sp.until.Load() {
		if t >= sp.refreshAt.Load() && !e.cooling.Load() && sp.busy.CompareAndSwap(false, true) {
			defer sp.busy.Store(false)
			bctx, cancel := s.hotBudget(ctx)
			defer cancel()
			sent := s.hotNow(t, now)
			if ttl, err := s.runMarker(bctx, "r", now, sp); err == nil && ttl > 0 {
				s.activate(sp, sent, time.Duration(ttl)*time.Millisecond)
			} else if err == nil {
				s.demoted(e, sp) // the marker is gone: demoted by another Store
				return false
			}
		}
		return true
	}
	bctx, cancel := s.hotBudget(ctx)
	defer cancel()
	sent := s.hotNow(t, now)
	left, err := s.runMarker(bctx, "d", now, sp)
	switch {
	case err != nil:
		return false // neither: the main key decides (and denies while marked)
	case left > 0:
		s.activate(sp, sent, time.Duration(left)*time.Millisecond)
		return t < sp.until.Load()
	}
	s.demoted(e, sp)
	return false
}

// demoted drops a split key's entry and reports it.
func (s *Store) demoted(e *hotEntry, sp *splitKey) {
	if s.hot.remove(e) {
		s.hot.report([]HotKeyEvent{{Rule: e.key.rule, Key: e.key.key, Mode: HotSplit, Shards: sp.n}})
	}
}

// splitReturn gives req's units back to one part of a split key: any part
// will do, since only the parts' sum counts (a part already full ignores
// it, which only makes the limit stricter). The units come off the part's
// latest take: a token names a time of the part that served the take,
// which need not be this one (reservations never take from parts).
func (s *Store) splitReturn(ctx context.Context, now instant, req *stores.Request, sp *splitKey) error {
	i := int(sp.next.Load()) % sp.n
	for j := range sp.denied {
		sp.denied[j].Store(0)
	}
	sub := *req
	sub.Limit, sub.Slot = sp.limits[i], 0
	_, err := s.checkKey(ctx, now, sp.keys[i], &sub, opReturn, 0)
	return err
}

// isMarker reports whether res is a main key's denial by a split marker.
func isMarker(res *stores.Result) bool { return !res.Allowed && res.RetryAfter >= markerWait }

// markerDenial makes a marker's denial, which the Store returns when it
// does not follow the split (no HotSplit, a set-up marker, ...), fit for a
// caller: its RetryAfter and ResetAfter become the time the marker has
// left, instead of the ~200 years of its "tat". The script's ResetAfter
// is tat − now, and tat is markerBase + expiry (ms ×1000) + 10n + phase,
// so the time left is ResetAfter − markerBase, rounded down to the ms:
// never more than the marker's real life. A marker past its expiry (the
// key outlives it until demoted) gives 1 ms.
func markerDenial(res *stores.Result) {
	if !isMarker(res) {
		return
	}
	left := (res.ResetAfter - markerBase*time.Microsecond).Truncate(time.Millisecond)
	left = max(left, time.Millisecond)
	res.RetryAfter, res.ResetAfter = left, left
}

// markerDenials is markerDenial of each result of a TakeAll that returned err.
func markerDenials(err error, results []stores.Result) error {
	if err == nil {
		for i := range results {
			markerDenial(&results[i])
		}
	}
	return err
}
