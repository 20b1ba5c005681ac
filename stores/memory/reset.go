package memory

import (
	"context"

	"github.com/sluicehq/ratelimit"
)

var _ ratelimit.Resetter = (*Store)(nil)

// Reset drops the state of (rule, key, alg), so that the key starts again
// with full capacity; see ratelimit.Resetter. rule and key are the
// Request's fields (Limiter.Reset maps a client key as the middleware does).
func (s *Store) Reset(ctx context.Context, rule, key string, alg ratelimit.Algorithm) error {
	return s.impl.(ratelimit.Resetter).Reset(ctx, rule, key, alg)
}
