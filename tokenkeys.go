package ratelimit

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"hash"
	"net/http"
	"strings"
	"sync"
)

const (
	tokenPrefix = "sha256:"
	hmacPrefix  = "hmac-sha256:"
	digestBytes = 16 // 128 bits
)

// TokenConfig configures a key function for a credential: its KeyFunc
// method is the general form of ByBearerToken and ByAPIKey, and the one for
// credentials of low entropy (Secret).
//
//	// API keys that are short or guessable, under a secret every instance shares:
//	ratelimit.TokenConfig{Header: "X-API-Key", Secret: secret}.KeyFunc()
//
// # Key format
//
// Credential key functions never return the credential: they return a
// digest of it, so that neither the store (Redis keys are visible to anyone
// with MONITOR or a backup), nor metrics and logs of keys, hold a usable
// secret. The digest is stable: the same credential gives the same key in
// every process and on every instance, so a fleet sharing a Redis store
// shares its buckets.
//
// The key is "sha256:" followed by the first 128 bits of SHA-256(credential),
// base64url-encoded without padding (22 characters): the token
// "s3cr3t-t0k3n" has the key "sha256:bkS7POnO99ehFojMDxoOwg". 128 bits keep
// accidental collisions out of reach (about 2^64 credentials before one is
// likely) in a short key.
//
// A plain digest of a low-entropy credential (a short PIN-like API key, an
// email address) can be reversed by guessing. With a Secret the key is
// "hmac-sha256:" and the first 128 bits of HMAC-SHA256(secret, credential)
// instead: without the secret, a leaked key reveals nothing. Every instance
// must use the same secret to share buckets, and changing it starts every
// client with a fresh bucket.
//
// # Verify before you count
//
// A token extractor does not check that the token is valid. A client sending a
// new random token on each request gets a new bucket each time. Install the
// limiter after the middleware that verifies the credential (so invalid
// tokens are rejected before they are counted), or add an IP-keyed rule next
// to the token rule.
type TokenConfig struct {
	// Header names the header that holds the credential whole, as ByAPIKey
	// reads it ("X-API-Key"). Empty, the credential is the bearer token of
	// the Authorization header, as ByBearerToken reads it.
	Header string

	// Secret, if set, keys credentials by HMAC-SHA256 under Secret instead
	// of a plain SHA-256, for credentials of low entropy. It must be at
	// least 16 bytes (32 random bytes recommended) and the same on every
	// instance. KeyFunc copies it.
	Secret []byte
}

// KeyFunc returns the KeyFunc of cfg. It panics with a "ratelimit:
// TokenConfig.KeyFunc: ..." message if Secret is set and shorter than 16
// bytes, or if Header is not a valid header name.
func (cfg TokenConfig) KeyFunc() KeyFunc {
	const fn = "TokenConfig.KeyFunc"
	if cfg.Secret != nil && len(cfg.Secret) < 16 {
		panic(fmt.Sprintf("ratelimit: %s: Secret of %d bytes; use at least 16 (32 random bytes recommended)", fn, len(cfg.Secret)))
	}
	h := newTokenHasher(cfg.Secret)
	if cfg.Header == "" {
		return bearerKey(fn, h)
	}
	return apiKey(fn, cfg.Header, h)
}

// tokenHasher turns credentials into keys.
type tokenHasher struct {
	prefix string
	keyed  bool      // HMAC rather than plain SHA-256
	states sync.Pool // of *hashState
}

// shortCredential is the longest credential hashed on the stack.
const shortCredential = 512

// hashState is a reusable SHA-256 or HMAC-SHA256 with buffers, so that
// hashing a credential of any length allocates nothing.
type hashState struct {
	h     hash.Hash
	chunk [256]byte
	sum   [sha256.Size]byte
}

// newTokenHasher returns a hasher of credentials, keyed by secret when it
// is not nil.
func newTokenHasher(secret []byte) *tokenHasher {
	t := &tokenHasher{prefix: tokenPrefix}
	t.states.New = func() any { return &hashState{h: sha256.New()} }
	if secret != nil {
		secret = append([]byte(nil), secret...)
		t.prefix, t.keyed = hmacPrefix, true
		t.states.New = func() any { return &hashState{h: hmac.New(sha256.New, secret)} }
	}
	return t
}

// key returns the key of credential c: prefix + base64url(digest[:16]). It
// allocates only the returned string.
func (t *tokenHasher) key(c string) string {
	var sum [sha256.Size]byte
	if !t.keyed && len(c) <= shortCredential {
		// The common case: hash a copy on the stack, no pool round trip.
		var b [shortCredential]byte
		sum = sha256.Sum256(b[:copy(b[:], c)])
	} else {
		s := t.states.Get().(*hashState)
		s.h.Reset()
		for len(c) > 0 {
			n := copy(s.chunk[:], c)
			s.h.Write(s.chunk[:n])
			c = c[n:]
		}
		sum = [sha256.Size]byte(s.h.Sum(s.sum[:0]))
		t.states.Put(s)
	}
	var buf [48]byte // the longest prefix and 22 characters
	n := copy(buf[:], t.prefix)
	base64.RawURLEncoding.Encode(buf[n:], sum[:digestBytes])
	return string(buf[:n+base64.RawURLEncoding.EncodedLen(digestBytes)])
}

// ByBearerToken keys requests by the bearer token of their Authorization
// header (RFC 6750: "Authorization: Bearer <token>", the scheme matched
// case-insensitively), hashed as described under TokenConfig: the token is
// never returned in clear.
//
// A missing Authorization header, another scheme, an empty or malformed token
// (not RFC 7235 token68 syntax), or more than one Authorization line gives an
// error wrapping ErrNoKey. The token is not verified: see "Verify before you
// count" under TokenConfig, whose KeyFunc keys tokens under a secret.
func ByBearerToken() KeyFunc {
	return bearerKey("ByBearerToken", newTokenHasher(nil))
}

// bearerKey is ByBearerToken with h, reporting errors as fn's.
func bearerKey(fn string, h *tokenHasher) KeyFunc {
	errMissing := fmt.Errorf("%w: %s: no Authorization header", ErrNoKey, fn)
	errRepeated := fmt.Errorf("%w: %s: Authorization header repeated", ErrNoKey, fn)
	errScheme := fmt.Errorf("%w: %s: Authorization is not a Bearer token", ErrNoKey, fn)
	errToken := fmt.Errorf("%w: %s: malformed bearer token", ErrNoKey, fn)
	return func(r *http.Request) (string, error) {
		v := r.Header.Values("Authorization")
		switch {
		case len(v) == 0:
			return "", errMissing
		case len(v) > 1:
			return "", errRepeated
		}
		a := v[0]
		const scheme = "Bearer "
		if len(a) < len(scheme) || !strings.EqualFold(a[:len(scheme)], scheme) {
			return "", errScheme
		}
		tok := strings.TrimLeft(a[len(scheme):], " ")
		if !token68(tok) {
			return "", errToken
		}
		return h.key(tok), nil
	}
}

// ByAPIKey keys requests by the API key in header (such as "X-API-Key"),
// hashed as described under TokenConfig: the key is never returned in clear.
//
// A missing or empty header, one sent on more than one line, or a value with
// anything but visible ASCII characters gives an error wrapping ErrNoKey. The
// key is not verified: see "Verify before you count" under TokenConfig,
// whose KeyFunc keys API keys under a secret. ByAPIKey panics if header is
// not a valid header name.
//
// Keys passed in the URL query are deliberately not supported: URLs end up in
// access logs, browser history and Referer headers. Move them to a header.
func ByAPIKey(header string) KeyFunc {
	return apiKey("ByAPIKey", header, newTokenHasher(nil))
}

// apiKey is ByAPIKey with h, reporting errors as fn's.
func apiKey(fn, header string, h *tokenHasher) KeyFunc {
	if !validHeaderName(header) {
		panic(fmt.Sprintf("ratelimit: %s: invalid header name %q", fn, header))
	}
	header = http.CanonicalHeaderKey(header)
	errMissing := fmt.Errorf("%w: %s: %s header missing or empty", ErrNoKey, fn, header)
	errRepeated := fmt.Errorf("%w: %s: %s header repeated", ErrNoKey, fn, header)
	errInvalid := fmt.Errorf("%w: %s: %s header is not visible ASCII", ErrNoKey, fn, header)
	return func(r *http.Request) (string, error) {
		v := r.Header.Values(header)
		switch {
		case len(v) == 0 || (len(v) == 1 && v[0] == ""):
			return "", errMissing
		case len(v) > 1:
			return "", errRepeated
		}
		for i := 0; i < len(v[0]); i++ {
			if c := v[0][i]; c <= ' ' || c >= 0x7F {
				return "", errInvalid
			}
		}
		return h.key(v[0]), nil
	}
}

// token68 reports whether s is RFC 7235 token68:
// 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=".
func token68(s string) bool {
	i := 0
	for ; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/' {
			continue
		}
		break
	}
	if i == 0 {
		return false
	}
	for ; i < len(s); i++ {
		if s[i] != '=' {
			return false
		}
	}
	return true
}
