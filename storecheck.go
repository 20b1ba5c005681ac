package ratelimit

import (
	"fmt"
	"reflect"

	"github.com/sluicehq/ratelimit/internal/memstore"
	"github.com/sluicehq/ratelimit/stores/memory"
)

// checkStore panics, naming what holds s, when s could not serve a single
// request: a nil pointer, which passes a s != nil test once in an
// interface, or a memory.Store that memory.New did not make. Checked when
// the limiter is built, so that a fallback store is not found to be
// unusable only when the rule's own store first fails.
func checkStore(what string, s Store) {
	if v := reflect.ValueOf(s); v.Kind() == reflect.Pointer && v.IsNil() {
		panic(fmt.Sprintf("ratelimit: %s is a nil %T", what, s))
	}
	if m, ok := s.(*memory.Store); ok {
		var h memstore.Handle
		m.Engine(&h)
		if h.Engine == nil {
			panic(fmt.Sprintf("ratelimit: %s is a zero memory.Store: make one with memory.New", what))
		}
	}
}
