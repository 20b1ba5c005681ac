package config

import (
	"net/http"
	"sync"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/stores/memory"
)

// Registry holds the Go values a rules file refers to by name, so that the
// file never holds code:
//
//	reg := &config.Registry{
//		Keys:   map[string]ratelimit.KeyFunc{"client_ip": ratelimit.ByClientIP("10.0.0.0/8")},
//		Stores: map[string]ratelimit.Store{"redis": redisstore.New(client)},
//	}
//
// Build the stores once and keep the Registry for the life of the process:
// every Limiter compiled against it then shares the same stores, so a
// reload keeps each unchanged rule's counters. A file that names no store
// uses a memory store the Registry creates on first use and keeps.
//
// Fill the maps before the first Parse and do not change them after. A
// Registry is safe for concurrent use by Parse, Load and Watch; use it by
// pointer.
type Registry struct {
	// Keys are the key functions rules name in key.
	Keys map[string]ratelimit.KeyFunc
	// Stores are the stores the file names in store and in fallback
	// failure policies.
	Stores map[string]ratelimit.Store
	// Predicates are the conditions rules name in match.when.
	Predicates map[string]func(*http.Request) bool
	// Clock, if set, is the clock of every Limiter and of the default
	// memory store (tests pass a ratelimittest.Clock).
	Clock ratelimit.Clock
	// Options are applied to every Limiter before the file's own (header
	// style, observers, error handler).
	Options []ratelimit.Option

	mu  sync.Mutex
	mem ratelimit.Store
}

func (r *Registry) defaultStore() ratelimit.Store {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mem == nil {
		var opts []memory.Option
		if r.Clock != nil {
			opts = append(opts, memory.WithClock(r.Clock))
		}
		r.mem = memory.New(opts...)
	}
	return r.mem
}
