package bench

import (
	"fmt"
	"runtime"
	"strconv"
	"time"
)

// PerKey is the live heap a library's in-memory store holds per tracked key.
type PerKey struct {
	Library string
	Keys    int
	// Bytes is the growth of the live heap (HeapAlloc after a GC) from before
	// the store was created to after n distinct keys were inserted, divided
	// by n: construction, maps, per-key structures and any key strings the
	// store keeps.
	Bytes float64
}

// BytesPerKey creates a fresh store for lib and counts one event for each of
// n distinct client-IP keys through the library's limiter API, under a limit
// that never denies, and returns the live heap growth per key. The key
// strings are built on the fly and not kept by the caller, so a store that
// retains them pays for them, as it would in a server.
func BytesPerKey(lib Library, n int) (PerKey, error) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	take, keep, closeFn := lib.Tracker(Limit{N: 1000, Per: time.Hour})
	buf := make([]byte, 0, 16)
	for i := 0; i < n; i++ {
		buf = append(buf[:0], "10."...)
		buf = strconv.AppendInt(buf, int64(i>>16&255), 10)
		buf = append(buf, '.')
		buf = strconv.AppendInt(buf, int64(i>>8&255), 10)
		buf = append(buf, '.')
		buf = strconv.AppendInt(buf, int64(i&255), 10)
		if !take(string(buf)) {
			closeFn()
			return PerKey{}, fmt.Errorf("%s: key %d denied under a limit that never denies", lib.Name, i)
		}
	}
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(keep)
	closeFn()
	return PerKey{Library: lib.Name, Keys: n, Bytes: (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / float64(n)}, nil
}
