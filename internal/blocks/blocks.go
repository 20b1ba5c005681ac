// Package blocks hands out values of one type a block at a time: the
// values of a block are allocated together and each is given out once, so
// that a value costs a fraction of an allocation and is never given to two
// callers.
//
// It is for values that must not be reused (a ResponseWriter wrapper that a
// handler's goroutine may still hold after the handler returned) but are
// too many to allocate one by one. A block holds on to its memory while
// any of its values is reachable.
//
// It knows nothing of the limiter. The package is internal to
// github.com/sluicehq/ratelimit.
package blocks

import "sync"

// Pool hands out zero values of T, Size of them per allocated block. The
// zero Pool is not usable: make one with New. A Pool is safe for
// concurrent use; a block is taken from the pool of the processor that
// asks (sync.Pool), so that callers on different processors do not share
// a counter.
type Pool[T any] struct {
	size  int
	spare sync.Pool // of *block[T] with values left
}

// block is values allocated together, handed out from next on.
type block[T any] struct {
	next int
	vs   []T
}

// New returns a Pool whose blocks hold size values. It panics if size is
// not positive.
func New[T any](size int) *Pool[T] {
	if size <= 0 {
		panic("ratelimit: blocks.New: size must be positive")
	}
	return &Pool[T]{size: size}
}

// Get returns a zero T that no other call of Get has returned or will.
func (p *Pool[T]) Get() *T {
	b, _ := p.spare.Get().(*block[T])
	if b == nil {
		b = &block[T]{vs: make([]T, p.size)}
	}
	v := &b.vs[b.next]
	if b.next++; b.next < len(b.vs) {
		p.spare.Put(b)
	}
	return v
}
