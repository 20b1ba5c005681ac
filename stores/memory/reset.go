package memory

import (
	"context"
	"fmt"

	"github.com/sluicehq/ratelimit/internal/memstore"
	"github.com/sluicehq/ratelimit/stores"
)

var _ stores.Resetter = (*Store)(nil)

// Reset drops the state of (rule, key, alg), so that the key starts again
// with full capacity; see stores.Resetter. rule and key are the
// Request's fields (Limiter.Reset maps a client key as the middleware does).
func (s *Store) Reset(_ context.Context, rule, key string, alg stores.Algorithm) error {
	a, ok := memstore.AlgOf(alg)
	if !ok {
		return fmt.Errorf("%w: unknown %v", stores.ErrInvalidRequest, alg)
	}
	s.engine.Delete(&memstore.Request{Rule: rule, Key: key, Alg: a})
	return nil
}
