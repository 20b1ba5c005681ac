package clientip

import (
	"math/rand/v2"
	"sync/atomic"
	"unsafe"
)

// PeerCache remembers the keys of recently seen peer addresses
// (http.Request.RemoteAddr), so that the requests of one connection parse
// its address once rather than each time. net/http gives every request of
// a connection the same RemoteAddr string, formatted once when the
// connection was accepted: the cache finds an address's slot by where
// that string's bytes are, which costs no hashing, and an entry is used
// only for a string at the same place, of the same length and of the same
// text as the copy the entry keeps of its own. The text is compared, not
// trusted for being at the same place: a server or adaptor may give
// RemoteAddr the bytes of a buffer it reuses once the handler returns
// (unsafe.String over a []byte, as fasthttp's adaptor does with its
// request's memory), so that a later client's address of the same length
// lies in the same bytes. An entry keeps copies of its address and key,
// and so holds none of the caller's memory. A key is a function of the
// address's text alone (under the key function that owns the cache), so an
// entry never gives an address the key of another. An equal address in a
// string of its own (formatted again) is another entry.
//
// It is direct-mapped and bounded: PeerCacheSlots entries, each replacing
// the one in its slot. A miss puts its entry when the slot is empty, and
// otherwise once in peerCacheAdmit misses, picked at random: a stream of
// addresses seen once each (many short connections, or more connections
// than slots) costs an allocation on few of its misses, while a busy
// connection is cached after some tens of requests.
//
// The zero value is an empty cache, safe for concurrent use. Entries are
// immutable once put.
type PeerCache struct {
	// at is where the bytes of each slot's address are, so that a miss
	// reads no entry; an entry is put before its at, and trusted only
	// when its own address is the one asked about.
	at    [PeerCacheSlots]atomic.Uintptr
	slots [PeerCacheSlots]atomic.Pointer[peerEntry]
}

// PeerCacheSlots is the number of entries of a PeerCache.
const PeerCacheSlots = 256

// peerCacheAdmit is one in how many misses puts its entry into an occupied
// slot.
const peerCacheAdmit = 64

// peerEntry is the key of the peer address addr. It fills a cache line of
// its own (the allocator puts an object of 64 bytes on a line boundary): a
// connection's every request reads it, and a smaller object shares its
// line with others of its size, such as a response's header slices, which
// other cores write.
type peerEntry struct {
	addr, key string  // copies: see put
	at        uintptr // where the bytes of the address put were
	_         [24]byte
}

// slot is the slot of addr, by where its bytes are: the strings that
// share their bytes (one connection's RemoteAddr) share a slot.
func slot(addr string) (i int, at uintptr) {
	at = uintptr(unsafe.Pointer(unsafe.StringData(addr)))
	return int(uint64(at) * 0x9e3779b97f4a7c15 >> 56), at // the top 8 bits: 256 slots
}

// Get returns the cached key of addr, and whether there was one.
func (c *PeerCache) Get(addr string) (string, bool) {
	if i, at := slot(addr); c.at[i].Load() == at {
		if e := c.slots[i].Load(); e != nil && e.at == at && e.addr == addr {
			return e.key, true
		}
	}
	return "", false
}

// Put caches key as the key of addr, after a miss of Get: into an empty
// slot always, otherwise for one miss in peerCacheAdmit.
func (c *PeerCache) Put(addr, key string) {
	if i, at := slot(addr); c.at[i].Load() == 0 || rand.Uint32()%peerCacheAdmit == 0 {
		c.put(i, at, addr, key)
	}
}

// put puts the entry of addr into slot i, at being where addr's bytes are.
// The entry's address and key are copies, in one allocation: a key may be
// a substring of addr (an IPv4 address's), and addr's bytes may be
// rewritten once its request is done.
func (c *PeerCache) put(i int, at uintptr, addr, key string) {
	b := make([]byte, len(addr)+len(key))
	copy(b, addr)
	copy(b[len(addr):], key)
	text := unsafe.String(unsafe.SliceData(b), len(b))
	c.slots[i].Store(&peerEntry{addr: text[:len(addr)], key: text[len(addr):], at: at})
	c.at[i].Store(at)
}
