package ratelimit_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores"
)

// keyStore records the keys the limiter sends and counts in a real memory
// store.
type keyStore struct {
	ratelimit.Store
	mu   sync.Mutex
	keys []string
}

func (s *keyStore) Take(ctx context.Context, req stores.Request) (ratelimit.Result, error) {
	s.mu.Lock()
	s.keys = append(s.keys, req.Key)
	s.mu.Unlock()
	return s.Store.Take(ctx, req)
}

func TestLongKeyHashCannotBeSentAsAShortKey(t *testing.T) {
	long := strings.Repeat("L", 300)
	sum := sha256.Sum256([]byte(long))
	forgeries := []string{
		"sha256:" + hex.EncodeToString(sum[:]),  // the mapping before this fix
		"~sha256:" + hex.EncodeToString(sum[:]), // the mapping now
	}
	for _, forged := range forgeries {
		t.Run(forged[:8], func(t *testing.T) {
			store := &keyStore{Store: ratelimit.NewMemoryStoreForTest()}
			h := ratelimit.New(ratelimit.PerHour(1), ratelimit.ByHeader("X-Key"), ratelimit.WithStore(store))(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			first := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", "", "X-Key", long))
			second := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", "", "X-Key", forged))
			if first.Limited() || second.Limited() {
				t.Fatalf("the forged key %q shares the long key's bucket (statuses %d, %d); store keys %q", forged, first.Code, second.Code, store.keys)
			}
			if store.keys[0] == store.keys[1] {
				t.Fatalf("both keys reached the store as %q", store.keys[0])
			}
		})
	}
}

func TestStoreKeysAreInjective(t *testing.T) {
	long := strings.Repeat("k", 257)
	inputs := []string{
		"", "~", "~~", "a", "~a", "~~a", "sha256:x", "~sha256:x",
		ratelimit.CompactKey(long), ratelimit.CompactKey(long + "x"),
		strings.Repeat("~", 256), strings.Repeat("~", 255), strings.Repeat("a", 256),
		long, long + "x", "~" + long[1:],
		ratelimit.CompactKey("~a"),
	}
	seen := map[string]string{}
	for _, in := range inputs {
		out := ratelimit.CompactKey(in)
		if prev, ok := seen[out]; ok && prev != in {
			t.Fatalf("%q and %q both map to %q", prev, in, out)
		}
		seen[out] = in
		if len(out) > 257 {
			t.Fatalf("key of %d bytes maps to %d bytes", len(in), len(out))
		}
	}
	// Ordinary keys keep their store key: no state is lost on upgrade.
	for _, k := range []string{"192.0.2.1", "2001:db8::1", "user:42", "sha256:abc", strings.Repeat("a", 256)} {
		if got := ratelimit.CompactKey(k); got != k {
			t.Fatalf("CompactKey(%q) = %q, want it unchanged", k, got)
		}
	}
}

// bytesPerRun returns the bytes allocated per call of f: the least of
// several batches, so that a stray allocation elsewhere in the process (a
// finishing goroutine of an earlier test, a sync.Pool the race detector
// emptied) cannot fail a bound, while a copy of a 1 MB key fails every
// batch.
func bytesPerRun(f func()) uint64 {
	const runs = 20
	per := uint64(1 << 62)
	for range 5 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range runs {
			f()
		}
		runtime.ReadMemStats(&after)
		per = min(per, (after.TotalAlloc-before.TotalAlloc)/runs)
	}
	return per
}

func TestLongKeyIsHashedWithoutCopy(t *testing.T) {
	key := strings.Repeat("m", 1<<20)
	if n := bytesPerRun(func() { ratelimit.CompactKey(key) }); n >= 1024 {
		t.Errorf("CompactKey of 1 MB allocates %d bytes, want under 1024 (the key is 72 bytes)", n)
	}
	h := ratelimit.New(ratelimit.PerSecond(1e6), ratelimit.ByHeader("X-Key"))(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	r := ratelimittest.NewRequest("GET", "/", "192.0.2.1:1", "X-Key", key)
	w := ratelimittest.NewDiscardWriter()
	serve := func() { w.Reset(); h.ServeHTTP(w, r) }
	serve() // the bucket exists from here on
	per := bytesPerRun(serve)
	t.Logf("a request keyed by a 1 MB header allocates %d bytes", per)
	if per >= 4096 {
		t.Fatalf("a request keyed by a 1 MB header allocates %d bytes, want under 4096", per)
	}
}
