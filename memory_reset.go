package ratelimit

import (
	"context"
	"fmt"

	"github.com/sluicehq/ratelimit/internal/memstore"
)

var _ Resetter = (*memoryStore)(nil)

// Reset drops the state of (rule, key, alg); see Resetter.
func (s *memoryStore) Reset(_ context.Context, rule, key string, alg Algorithm) error {
	if alg >= numAlgorithms {
		return fmt.Errorf("%w: unknown %v", ErrInvalidRequest, alg)
	}
	s.engine.Delete(&memstore.Request{Rule: rule, Key: key, Alg: memstore.Alg(alg)})
	return nil
}
