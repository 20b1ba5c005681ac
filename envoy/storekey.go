package envoy

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
)

// storeKey maps a descriptor's bucket key to the key sent to the store,
// as the core's middleware maps its keys, so that the two share a bucket
// (see docs/envoy.md) and a descriptor value, which a client may choose
// (a request header), never makes the store keep or send a large key:
//
//   - a key of at most maxKeyLen bytes is sent as is, unless it starts
//     with '~', which is then doubled;
//   - a longer key is sent as "~sha256:" and its hex SHA-256, a string no
//     short key maps to.
//
// TestLongDescriptorValueSharesTheBucketWithABoundedKey holds it to the
// middleware's mapping.
func storeKey(k string) string {
	if len(k) <= maxKeyLen {
		if len(k) > 0 && k[0] == '~' {
			return "~" + k
		}
		return k
	}
	h := sha256.New()
	io.WriteString(h, k)
	return "~sha256:" + hex.EncodeToString(h.Sum(nil))
}

// maxKeyLen is the longest key the middleware sends to a store as is.
const maxKeyLen = 256
