package memory

import (
	"context"
	"fmt"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/internal/memstore"
)

var _ ratelimit.Resetter = (*Store)(nil)

// Reset drops the state of (rule, key, alg), so that the key starts again
// with full capacity; see ratelimit.Resetter. rule and key are the
// Request's fields (Limiter.Reset maps a client key as the middleware does).
func (s *Store) Reset(_ context.Context, rule, key string, alg ratelimit.Algorithm) error {
	a, ok := engineAlg(alg)
	if !ok {
		return fmt.Errorf("%w: unknown %v", ratelimit.ErrInvalidRequest, alg)
	}
	s.engine.Delete(&memstore.Request{Rule: rule, Key: key, Alg: a})
	return nil
}
