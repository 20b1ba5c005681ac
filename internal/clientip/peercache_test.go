package clientip

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"unsafe"
	"weak"
)

// keyOf is the key the tests cache for addr: a function of addr alone, as
// a key function's is.
func keyOf(addr string) string { return "key of " + addr }

// connAddrs returns n distinct peer addresses, each a string of its own, as
// net/http formats a connection's RemoteAddr once.
func connAddrs(n int) []string {
	addrs := make([]string, n)
	for i := range addrs {
		addrs[i] = fmt.Sprintf("10.%d.%d.%d:%d", i>>16&255, i>>8&255, i&255, 1024+i%50000)
	}
	return addrs
}

func TestPeerCacheNeverGivesAnAddressAnotherAddressesKey(t *testing.T) {
	var c PeerCache
	// Four times as many connections as slots: most slots are shared by
	// several, and each goroutine puts and reads them all.
	addrs := connAddrs(4 * PeerCacheSlots)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for round := range 50 {
				for i := range addrs {
					a := addrs[(i+g*len(addrs)/4+round)%len(addrs)]
					if key, ok := c.Get(a); ok {
						if key != keyOf(a) {
							t.Errorf("Get(%q) = %q, want %q", a, key, keyOf(a))
							return
						}
						continue
					}
					c.Put(a, keyOf(a))
				}
			}
		})
	}
	wg.Wait()
}

func TestPeerCacheTellsApartAddressesSharingTheirBytes(t *testing.T) {
	var c PeerCache
	// Two addresses that begin at the same byte, and so share a slot.
	long := strings.Clone("192.0.2.1:12345")
	short := long[:len(long)-1]
	if unsafe.StringData(long) != unsafe.StringData(short) {
		t.Fatal("the addresses do not share their bytes")
	}
	c.Put(long, keyOf(long))
	if key, ok := c.Get(long); !ok || key != keyOf(long) {
		t.Fatalf("Get(%q) = %q, %v after Put, want %q", long, key, ok, keyOf(long))
	}
	if key, ok := c.Get(short); ok {
		t.Errorf("Get(%q) = %q, the key of %q", short, key, long)
	}
}

func TestPeerCacheKnowsAConnectionsAddressByItsString(t *testing.T) {
	var c PeerCache
	a := strings.Clone("192.0.2.1:1234")
	c.Put(a, keyOf(a))
	if key, ok := c.Get(a); !ok || key != keyOf(a) {
		t.Errorf("Get(%q) = %q, %v: the address put into an empty cache is not cached", a, key, ok)
	}
	// The same text in strings of their own: whichever slot they land in,
	// they are not a's string, and no key is theirs yet.
	for range 1000 {
		b := strings.Clone(a)
		if key, ok := c.Get(b); ok {
			t.Fatalf("Get(%q), a copy, = %q, before any Put of it", b, key)
		}
	}
}

// TestPeerCacheHoldsNoneOfItsCallersMemory: an entry keeps copies of its
// address and key (see PeerCache.put), so the cache keeps none of the
// addresses it is given alive, however many it caches.
func TestPeerCacheHoldsNoneOfItsCallersMemory(t *testing.T) {
	var c PeerCache
	const n = 8 * PeerCacheSlots
	alive, hits := putAll(&c, n)
	if hits == 0 {
		t.Fatal("no Get found an address put: the cache holds nothing")
	}
	runtime.GC()
	kept := 0
	for _, w := range alive {
		if w.Value() != nil {
			kept++
		}
	}
	runtime.KeepAlive(&c)
	if kept > 0 {
		t.Errorf("%d of %d addresses still reachable after a GC, want none", kept, n)
	}
}

// putAll puts n addresses, each many times, into c, and returns weak
// pointers to their bytes, which nothing else holds, and how many Gets
// found their address. Each address has an allocation of its own, too
// large for the allocator to pack with others.
func putAll(c *PeerCache, n int) (alive []weak.Pointer[byte], hits int) {
	addrs := connAddrs(n)
	alive = make([]weak.Pointer[byte], n)
	for i, a := range addrs {
		b := append(make([]byte, 0, 64), a...)
		addrs[i] = unsafe.String(unsafe.SliceData(b), len(b))
		alive[i] = weak.Make(unsafe.SliceData(b))
	}
	for range 100 {
		for _, a := range addrs {
			if _, ok := c.Get(a); ok {
				hits++
			} else {
				c.Put(a, a[:strings.IndexByte(a, ':')]) // as a key of IPv4
			}
		}
	}
	return alive, hits
}

// TestPeerEntryFillsACacheLine: a cached key is read by every request of its
// connection, on every core, and written by none; were its entry to share a
// cache line with objects that other cores write (a response's header
// slices are of the next smaller size class), each such write would take the
// line from the readers.
func TestPeerEntryFillsACacheLine(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the padding is sized for 64-bit platforms")
	}
	if n := unsafe.Sizeof(peerEntry{}); n != 64 {
		t.Errorf("peerEntry is %d bytes, want 64", n)
	}
}
