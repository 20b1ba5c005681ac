package redisstore

import (
	"context"
	"fmt"

	"github.com/sluicehq/ratelimit/stores"
)

var _ stores.Resetter = (*Store)(nil)

// Reset deletes the Redis key that holds the state of (rule, key, alg)
// (for GCRA, with the holes of its reservations given back early), so
// that the key starts again with full capacity on every instance, and drops
// what this instance keeps of it (a cached denial, a lease). Other
// instances may still answer from a cached denial until it expires (at
// most the RetryAfter it was cached with) and spend the rest of a lease;
// see stores.Resetter. A GCRA key split by WithHotKeys keeps its split:
// its parts are deleted instead, which together hold the key's capacity.
func (s *Store) Reset(ctx context.Context, rule, key string, alg stores.Algorithm) error {
	if int(alg) >= len(algorithmCodes) {
		return fmt.Errorf("%w: unknown %v", stores.ErrInvalidRequest, alg)
	}
	if len(rule)+len(key) > MaxKeyLen {
		return fmt.Errorf("%w: rule and key exceed the Redis store's bound of %d bytes", stores.ErrInvalidRequest, MaxKeyLen)
	}
	req := stores.Request{Rule: rule, Key: key, Algorithm: alg}
	if s.denied != nil {
		s.denied.forget(&req)
	}
	if s.leases != nil {
		s.leases.drop(&req)
	}
	ctx, cancel := s.budget(ctx)
	defer cancel()
	if alg == stores.GCRA {
		if done, err := s.resetSplit(ctx, &req); done { // hotsplit.go
			return err
		}
	}
	keys := []string{stateKey(s.prefix, &req)}
	if alg == stores.GCRA { // and its holes (script.lua), in the same slot
		keys = append(keys, holesKey(keys[0]))
	}
	if err := s.bounded(ctx, func() error { return s.client.Del(ctx, keys...).Err() }); err != nil {
		return fmt.Errorf("ratelimit: redis: reset: %w", err)
	}
	return nil
}

// drop forgets req's lease, if any: its units are not returned.
func (t *leaseTable) drop(req *stores.Request) {
	k := cacheKey{req.Rule, req.Key, req.Algorithm}
	sh := &t.shards[k.hash()%cacheShards]
	sh.mu.Lock()
	delete(sh.m, k)
	sh.mu.Unlock()
}
