// Package labelcap bounds the label sets of metrics integrations
// (metrics/prometheus, metrics/otel, or your own Observer): each distinct
// (rule, key kind) pair gets a value of its own until a cap is reached, and
// every later pair shares one "other" value, so that rule names generated
// at run time can never grow a metric without bound.
//
// It lives in the core module, as an exported package, because both metrics
// modules use it and a module must not import another module's internal
// packages: its version is the core's, and the metrics modules require it
// through their requirement on the core.
package labelcap

import (
	"sync"
	"sync/atomic"
)

type pair struct{ rule, kind string }

// Cap maps (rule, key kind) pairs to values, creating at most max of them.
// Lookups of known pairs take no lock (a copy-on-write map behind an atomic
// pointer); creating a pair copies the map under a lock, which happens at
// most max times. A Cap is safe for concurrent use; create one with New.
type Cap[V any] struct {
	max   int
	other V
	make  func(rule, kind string) V

	pairs atomic.Pointer[map[pair]V] // copy on write
	full  atomic.Bool                // pairs holds max pairs
	mu    sync.Mutex                 // serialises writers of pairs
}

// New returns a Cap of max pairs whose values are made by make, and whose
// pairs beyond max share other.
func New[V any](max int, other V, make func(rule, kind string) V) *Cap[V] {
	c := &Cap[V]{max: max, other: other, make: make}
	c.pairs.Store(&map[pair]V{})
	return c
}

// Get returns the value of (rule, kind), making it while there is room, or
// the shared "other" value.
func (c *Cap[V]) Get(rule, kind string) V {
	if v, ok := (*c.pairs.Load())[pair{rule, kind}]; ok {
		return v
	}
	if c.full.Load() {
		// full is set after the last map is stored: look once more, in
		// case the pair was added between the two loads.
		if v, ok := (*c.pairs.Load())[pair{rule, kind}]; ok {
			return v
		}
		return c.other
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := *c.pairs.Load()
	if v, ok := old[pair{rule, kind}]; ok {
		return v
	}
	if len(old) >= c.max {
		return c.other
	}
	m := make(map[pair]V, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	v := c.make(rule, kind)
	m[pair{rule, kind}] = v
	c.pairs.Store(&m)
	if len(m) >= c.max {
		c.full.Store(true)
	}
	return v
}
