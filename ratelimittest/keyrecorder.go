package ratelimittest

import (
	"net/http"
	"sync"
	"testing"

	"github.com/sluicehq/ratelimit"
)

// KeyRecorder records what a key function returns, to check which key a
// limiter really uses: the client IP behind your proxies, a route pattern
// inside a router group. Wrap the key function, install the limiter, send a
// request, then look at Last. Its methods are safe for concurrent use; the
// zero value is ready to use.
type KeyRecorder struct {
	mu   sync.Mutex
	keys []string
	errs []error
}

// Wrap returns key, recording every key and error it returns.
func (kr *KeyRecorder) Wrap(key ratelimit.KeyFunc) ratelimit.KeyFunc {
	return func(r *http.Request) (string, error) {
		k, err := key(r)
		kr.mu.Lock()
		defer kr.mu.Unlock()
		kr.keys = append(kr.keys, k)
		kr.errs = append(kr.errs, err)
		return k, err
	}
}

// Last returns the most recent key and error; ok is false if the key
// function was never called.
func (kr *KeyRecorder) Last() (key string, err error, ok bool) {
	kr.mu.Lock()
	defer kr.mu.Unlock()
	if len(kr.keys) == 0 {
		return "", nil, false
	}
	return kr.keys[len(kr.keys)-1], kr.errs[len(kr.errs)-1], true
}

// Len returns how many times the key function was called.
func (kr *KeyRecorder) Len() int {
	kr.mu.Lock()
	defer kr.mu.Unlock()
	return len(kr.keys)
}

// MustLast is Last for tests: it fails tb if the key function was never
// called.
func (kr *KeyRecorder) MustLast(tb testing.TB) (key string, err error) {
	tb.Helper()
	key, err, ok := kr.Last()
	if !ok {
		tb.Fatal("ratelimittest: the key function was never called")
	}
	return key, err
}
