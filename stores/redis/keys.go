package redisstore

import (
	"strings"

	"github.com/sluicehq/ratelimit/stores"
)

// MaxKeyLen bounds len(Request.Rule)+len(Request.Key) in bytes. Longer
// requests fail with an error wrapping stores.ErrInvalidRequest rather
// than sending many megabytes to Redis on every check. The middleware
// hashes keys longer than 256 bytes, so only direct callers of the Store
// can reach the bound.
const MaxKeyLen = 4 << 20

// algorithmCodes name the algorithms in keys: each (rule, key, algorithm)
// has its own state. Concurrency state is a sorted set of slots, code 'z';
// earlier releases kept it as a string under code 'c', which this release
// never reads (so a rolling upgrade never meets WRONGTYPE: the old keys
// expire on their own).
var algorithmCodes = [...]byte{stores.GCRA: 'g', stores.SlidingWindow: 's', stores.FixedWindow: 'f', stores.Concurrency: 'z', stores.SlidingLog: 'l'}

// stateKey returns the Redis key of req's state:
//
//	<prefix>{<tag>}:<algorithm>:<rule>
//
// where tag is req.Key with '%' and '}' percent-encoded ("%25", "%7D"), or
// "%" for the empty key. The tag is the key's Redis Cluster hash tag: every
// rule and algorithm of one client key lives in one slot (so a TakeAll over
// the rules of one client is a single script even on Cluster), and since
// the tag cannot contain '}' and comes first, no user input chooses a
// different tag. The encoding is injective: distinct (rule, key, algorithm)
// give distinct keys.
func stateKey(prefix string, req *stores.Request) string {
	var b strings.Builder
	n := 0
	for i := 0; i < len(req.Key); i++ {
		if c := req.Key[i]; c == '%' || c == '}' {
			n += 2
		}
	}
	b.Grow(len(prefix) + len(req.Key) + n + len(req.Rule) + 6)
	b.WriteString(prefix)
	b.WriteByte('{')
	writeTag(&b, req.Key, n > 0)
	b.WriteString("}:")
	b.WriteByte(algorithmCodes[req.Algorithm])
	b.WriteByte(':')
	b.WriteString(req.Rule)
	return b.String()
}

func writeTag(b *strings.Builder, key string, escape bool) {
	switch {
	case key == "":
		b.WriteByte('%')
	case !escape:
		b.WriteString(key)
	default:
		for i := 0; i < len(key); i++ {
			switch c := key[i]; c {
			case '%':
				b.WriteString("%25")
			case '}':
				b.WriteString("%7D")
			default:
				b.WriteByte(c)
			}
		}
	}
}

// holesKey returns the key of the holes of GCRA state key k (see Holes in
// script.lua, which derives it alike): "h" in place of the algorithm code,
// a code no algorithm has, so no state key is a holes key.
//
//	<prefix>{<tag>}:h:<rule>
func holesKey(k string) string {
	j := strings.IndexByte(k, '}')
	return k[:j+1] + ":h" + k[j+3:]
}

// hashTag returns the hash tag of a key built by stateKey: the bytes
// between its first '{' and the first '}' after it.
func hashTag(key string) string {
	i := strings.IndexByte(key, '{')
	j := strings.IndexByte(key[i+1:], '}')
	return key[i+1 : i+1+j]
}

// slot returns the Redis Cluster slot of a key built by stateKey.
func slot(key string) uint16 { return crc16(hashTag(key)) % 16384 }

// crc16 is CRC-16/XMODEM, the checksum Redis Cluster hashes keys with.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc = crc<<8 ^ crc16Table[byte(crc>>8)^s[i]]
	}
	return crc
}

var crc16Table = func() (t [256]uint16) {
	for i := range t {
		crc := uint16(i) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
		t[i] = crc
	}
	return t
}()
