package memory

import "github.com/sluicehq/ratelimit/internal/memstore"

// Engine fills h with the engine behind s and the clock it reads. It is for
// package ratelimit, whose request path runs the engine directly, with each
// rule's check validated and prepared once; h's type is internal to this
// module, so the method is of no use elsewhere. A nil h is ignored.
func (s *Store) Engine(h *memstore.Handle) {
	if h != nil {
		h.Engine, h.Clock = s.engine, s.clock
	}
}
