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

// TokenOption configures ByBearerToken and ByAPIKey.
//
// # Key format
//
// ByBearerToken and ByAPIKey never return the credential: they return a
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
// email address) can be reversed by guessing. With HMACSecret the key is
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
type TokenOption func(*tokenOptions)

type tokenOptions struct {
	secret []byte
}

// HMACSecret keys credentials by HMAC-SHA256 under secret instead of a plain
// SHA-256, for credentials of low entropy; see TokenOption. The secret
// must be at least 16 bytes (32 random bytes recommended) and the same on
// every instance. It panics on a shorter secret.
func HMACSecret(secret []byte) TokenOption {
	if len(secret) < 16 {
		panic(fmt.Sprintf("ratelimit: HMACSecret: secret of %d bytes; use at least 16 (32 random bytes recommended)", len(secret)))
	}
	secret = append([]byte(nil), secret...)
	return func(o *tokenOptions) { o.secret = secret }
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

func newTokenHasher(fn string, opts []TokenOption) *tokenHasher {
	var o tokenOptions
	for _, opt := range opts {
		if opt == nil {
			panic(fmt.Sprintf("ratelimit: %s: nil TokenOption", fn))
		}
		opt(&o)
	}
	t := &tokenHasher{prefix: tokenPrefix}
	t.states.New = func() any { return &hashState{h: sha256.New()} }
	if secret := o.secret; secret != nil {
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
// case-insensitively), hashed as described under TokenOption: the token is
// never returned in clear.
//
// A missing Authorization header, another scheme, an empty or malformed token
// (not RFC 7235 token68 syntax), or more than one Authorization line gives an
// error wrapping ErrNoKey. The token is not verified: see "Verify before you
// count" under TokenOption. It panics on a nil option.
func ByBearerToken(opts ...TokenOption) KeyFunc {
	h := newTokenHasher("ByBearerToken", opts)
	errMissing := fmt.Errorf("%w: ByBearerToken: no Authorization header", ErrNoKey)
	errRepeated := fmt.Errorf("%w: ByBearerToken: Authorization header repeated", ErrNoKey)
	errScheme := fmt.Errorf("%w: ByBearerToken: Authorization is not a Bearer token", ErrNoKey)
	errToken := fmt.Errorf("%w: ByBearerToken: malformed bearer token", ErrNoKey)
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
// hashed as described under TokenOption: the key is never returned in clear.
//
// A missing or empty header, one sent on more than one line, or a value with
// anything but visible ASCII characters gives an error wrapping ErrNoKey. The
// key is not verified: see "Verify before you count" under TokenOption.
// ByAPIKey panics if header is not a valid header name, or on a nil option.
//
// Keys passed in the URL query are deliberately not supported: URLs end up in
// access logs, browser history and Referer headers. Move them to a header.
func ByAPIKey(header string, opts ...TokenOption) KeyFunc {
	if !validHeaderName(header) {
		panic(fmt.Sprintf("ratelimit: ByAPIKey: invalid header name %q", header))
	}
	header = http.CanonicalHeaderKey(header)
	h := newTokenHasher("ByAPIKey", opts)
	errMissing := fmt.Errorf("%w: ByAPIKey: %s header missing or empty", ErrNoKey, header)
	errRepeated := fmt.Errorf("%w: ByAPIKey: %s header repeated", ErrNoKey, header)
	errInvalid := fmt.Errorf("%w: ByAPIKey: %s header is not visible ASCII", ErrNoKey, header)
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
