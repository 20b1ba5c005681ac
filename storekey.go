package ratelimit

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"sync"
)

// maxKeyLen is the longest key sent to a store as is. Longer keys (a 1 MB
// header used as a key) are replaced by their SHA-256, so that a client
// cannot make the store keep or send large keys.
const maxKeyLen = 256

// Store keys live in two namespaces told apart by their first byte, so that
// no key a client sends can alias another:
//
//   - a key of at most maxKeyLen bytes is sent as is, unless it starts with
//     keyEscape, which is then doubled ("~x" is stored as "~~x");
//   - a longer key is stored as keyEscape + "sha256:" + the hex SHA-256 of
//     the key, a string no short key maps to (its second byte is not
//     keyEscape).
const (
	keyEscape  = '~'
	hashPrefix = "~sha256:"
)

// longKeyState hashes a long key in place: the key is fed to the digest
// in chunks, so that hashing a key of any length allocates nothing.
type longKeyState struct {
	h     hash.Hash
	chunk [512]byte
	sum   [sha256.Size]byte
}

var longKeyStates = sync.Pool{New: func() any { return &longKeyState{h: sha256.New()} }}

// compactKey maps a client-derived key to the key sent to the store. The
// mapping is injective (up to SHA-256 collisions), and a key of any length
// costs one allocation of at most 72 bytes: a long key is hashed in place.
func compactKey(k string) string {
	if len(k) <= maxKeyLen {
		if len(k) > 0 && k[0] == keyEscape {
			return string(keyEscape) + k
		}
		return k
	}
	s := longKeyStates.Get().(*longKeyState)
	s.h.Reset()
	for rest := k; len(rest) > 0; {
		n := copy(s.chunk[:], rest)
		s.h.Write(s.chunk[:n])
		rest = rest[n:]
	}
	var buf [len(hashPrefix) + 2*sha256.Size]byte
	n := copy(buf[:], hashPrefix)
	hex.Encode(buf[n:], s.h.Sum(s.sum[:0]))
	longKeyStates.Put(s)
	return string(buf[:])
}
