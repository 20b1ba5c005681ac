package ratelimit_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/ratelimit"
)

func TestByHeader(t *testing.T) {
	runKeyCases(t, ratelimit.ByHeader("x-tenant-id"), []keyCase{
		{"present", "192.0.2.1:1", []string{"X-Tenant-Id: acme"}, "acme"},
		{"kept in clear with separators", "192.0.2.1:1", []string{"X-Tenant-Id: a|b:c"}, "a|b:c"},
		{"long", "192.0.2.1:1", []string{"X-Tenant-Id: " + strings.Repeat("a", 1<<20)}, strings.Repeat("a", 1<<20)},
		{"missing", "192.0.2.1:1", nil, ""},
		{"empty", "192.0.2.1:1", []string{"X-Tenant-Id: "}, ""},
		{"repeated", "192.0.2.1:1", []string{"X-Tenant-Id: a", "X-Tenant-Id: b"}, ""},
	})
	r := kfReq("192.0.2.1:1", "X-Tenant-Id: acme")
	kf := ratelimit.ByHeader("X-Tenant-ID")
	if a := testing.AllocsPerRun(100, func() { _, _ = kf(r) }); a != 0 {
		t.Errorf("ByHeader: %v allocs/op, want 0", a)
	}
	for _, name := range []string{"", "X Tenant", "X-Tenant:", "Ä"} {
		if msg := kfPanics(func() { ratelimit.ByHeader(name) }); !strings.HasPrefix(msg, "ratelimit: ByHeader: invalid header name") {
			t.Errorf("ByHeader(%q) panic = %q", name, msg)
		}
	}
	for _, name := range []string{"X-Forwarded-For", "forwarded", "X-Real-IP", "CF-Connecting-IP", "True-Client-IP", "Authorization", "cookie"} {
		if msg := kfPanics(func() { ratelimit.ByHeader(name) }); !strings.HasPrefix(msg, "ratelimit: ByHeader(") || !strings.Contains(msg, "use ") {
			t.Errorf("ByHeader(%q) panic = %q", name, msg)
		}
	}
}

type userKey struct{}

func userFromContext(r *http.Request) (string, bool) {
	u, ok := r.Context().Value(userKey{}).(string)
	return u, ok
}

func withUser(r *http.Request, u string) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), userKey{}, u))
}

func TestByUser(t *testing.T) {
	kf := ratelimit.ByUser(userFromContext)
	if k, err := kf(withUser(kfReq("192.0.2.1:1"), "alice")); k != "alice" || err != nil {
		t.Errorf("ByUser = %q, %v", k, err)
	}
	for _, r := range []*http.Request{kfReq("192.0.2.1:1"), withUser(kfReq("192.0.2.1:1"), "")} {
		if k, err := kf(r); k != "" || !errors.Is(err, ratelimit.ErrNoKey) {
			t.Errorf("anonymous ByUser = %q, %v; want ErrNoKey", k, err)
		}
	}
	if msg := kfPanics(func() { ratelimit.ByUser(nil) }); !strings.HasPrefix(msg, "ratelimit: ByUser") {
		t.Errorf("ByUser(nil) panic = %q", msg)
	}
}

// serveKey routes path through a ServeMux with pattern and returns the key kf
// computes inside the handler.
func serveKey(t *testing.T, kf ratelimit.KeyFunc, pattern, method, path string) (string, error) {
	t.Helper()
	var (
		key string
		err error
	)
	mux := http.NewServeMux()
	mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) { key, err = kf(r) })
	mux.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(method, path, nil))
	return key, err
}

func TestByRoute(t *testing.T) {
	kf := ratelimit.ByRoute()
	for _, p := range []string{"/users/1", "/users/2", "/users/%2e%2e", "/users/x?y=z"} {
		if k, err := serveKey(t, kf, "GET /users/{id}", "GET", p); k != "GET /users/{id}" || err != nil {
			t.Errorf("ByRoute(%s) = %q, %v", p, k, err)
		}
	}
	if k, err := serveKey(t, kf, "/static/", "GET", "/static/a/b/c"); k != "/static/" || err != nil {
		t.Errorf("ByRoute(prefix) = %q, %v", k, err)
	}
	// Outside a ServeMux there is no pattern, and the raw path is never used.
	if k, err := kf(httptest.NewRequest("GET", "/users/1", nil)); k != "" || !errors.Is(err, ratelimit.ErrNoKey) {
		t.Errorf("ByRoute without mux = %q, %v; want ErrNoKey", k, err)
	}

	rf := ratelimit.ByRouteFunc(func(r *http.Request) string {
		if strings.HasPrefix(r.URL.Path, "/users/") {
			return "/users/:id"
		}
		return ""
	})
	if k, err := rf(httptest.NewRequest("GET", "/users/7", nil)); k != "/users/:id" || err != nil {
		t.Errorf("ByRouteFunc = %q, %v", k, err)
	}
	if k, err := rf(httptest.NewRequest("GET", "/other", nil)); k != "" || !errors.Is(err, ratelimit.ErrNoKey) {
		t.Errorf("ByRouteFunc no match = %q, %v", k, err)
	}
	if msg := kfPanics(func() { ratelimit.ByRouteFunc[func(*http.Request) string](nil) }); !strings.HasPrefix(msg, "ratelimit: ByRouteFunc") {
		t.Errorf("ByRouteFunc(nil) panic = %q", msg)
	}

	// A pattern function that says why it has no route: its error is the
	// key's; an empty pattern without one is ErrNoKey as above.
	errNotYet := fmt.Errorf("%w: not routed yet", ratelimit.ErrNoKey)
	ef := ratelimit.ByRouteFunc(func(r *http.Request) (string, error) {
		switch r.URL.Path {
		case "/users/7":
			return "/users/:id", nil
		case "/early":
			return "", errNotYet
		}
		return "", nil
	})
	if k, err := ef(httptest.NewRequest("GET", "/users/7", nil)); k != "/users/:id" || err != nil {
		t.Errorf("ByRouteFunc with errors = %q, %v", k, err)
	}
	if k, err := ef(httptest.NewRequest("GET", "/early", nil)); k != "" || !errors.Is(err, errNotYet) {
		t.Errorf("ByRouteFunc's own error = %q, %v; want errNotYet", k, err)
	}
	if k, err := ef(httptest.NewRequest("GET", "/other", nil)); k != "" || !errors.Is(err, ratelimit.ErrNoKey) {
		t.Errorf("ByRouteFunc with errors, no match = %q, %v; want ErrNoKey", k, err)
	}
}

func constKey(k string) ratelimit.KeyFunc {
	return func(*http.Request) (string, error) { return k, nil }
}

func TestKeys(t *testing.T) {
	r := kfReq("192.0.2.1:1")
	key := func(parts ...ratelimit.KeyFunc) string {
		t.Helper()
		k, err := ratelimit.Keys(parts...)(r)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	if got := key(constKey("alice"), constKey("GET /users/{id}")); got != "5:alice|15:GET /users/{id}" {
		t.Errorf("Keys = %q", got)
	}
	if got := key(constKey("192.0.2.1")); got != "192.0.2.1" {
		t.Errorf("Keys(one) = %q", got)
	}
	// Values cannot forge a boundary.
	forgeries := [][]ratelimit.KeyFunc{
		{constKey("a|b"), constKey("c")},
		{constKey("a"), constKey("b|c")},
		{constKey("a|1:b"), constKey("c")},
		{constKey("a"), constKey("1:b|c")},
		{constKey("1:a|1:b"), constKey("c")},
		{constKey("1:a"), constKey("1:b"), constKey("c")},
		{constKey("a"), constKey("b"), constKey("c")},
		{constKey("ab"), constKey("c")},
		{constKey("a"), constKey("bc")},
	}
	seen := map[string]int{}
	for i, parts := range forgeries {
		k := key(parts...)
		if j, dup := seen[k]; dup {
			t.Errorf("forgeries %d and %d share key %q", j, i, k)
		}
		seen[k] = i
	}
	// Long parts, more than the stack buffer.
	long := strings.Repeat("x", 1000)
	if got := key(constKey(long), constKey("y")); got != "1000:"+long+"|1:y" {
		t.Errorf("Keys(long) = %q...", got[:20])
	}
	many := make([]ratelimit.KeyFunc, 20)
	for i := range many {
		many[i] = constKey("k")
	}
	if got := key(many...); got != strings.TrimSuffix(strings.Repeat("1:k|", 20), "|") {
		t.Errorf("Keys(20) = %q", got)
	}

	// Errors propagate; empty keys are errors.
	boom := errors.New("boom")
	failing := func(*http.Request) (string, error) { return "", boom }
	if _, err := ratelimit.Keys(constKey("a"), failing)(r); err != boom {
		t.Errorf("Keys with failing part: %v", err)
	}
	for _, parts := range [][]ratelimit.KeyFunc{{constKey("")}, {constKey("a"), constKey("")}} {
		if k, err := ratelimit.Keys(parts...)(r); k != "" || !errors.Is(err, ratelimit.ErrNoKey) {
			t.Errorf("Keys with empty part = %q, %v", k, err)
		}
	}
	// The caller's slice may change afterwards.
	parts := []ratelimit.KeyFunc{constKey("a"), constKey("b")}
	kf := ratelimit.Keys(parts...)
	parts[0] = failing
	if k, err := kf(r); k != "1:a|1:b" || err != nil {
		t.Errorf("Keys after caller's change = %q, %v", k, err)
	}

	if msg := kfPanics(func() { ratelimit.Keys() }); msg != "ratelimit: Keys: no parts" {
		t.Errorf("Keys() panic = %q", msg)
	}
	if msg := kfPanics(func() { ratelimit.Keys(constKey("a"), nil) }); msg != "ratelimit: Keys: part 1 is nil" {
		t.Errorf("Keys(nil) panic = %q", msg)
	}
	two := ratelimit.Keys(ratelimit.ByIP(), constKey("GET /x"))
	if a := testing.AllocsPerRun(100, func() { _, _ = two(r) }); a > 1 {
		t.Errorf("Keys: %v allocs/op, want at most 1", a)
	}
}

func sha256Key(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + base64.RawURLEncoding.EncodeToString(sum[:16])
}

func hmacKey(secret []byte, s string) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(s))
	return "hmac-sha256:" + base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:16])
}

func TestByBearerToken(t *testing.T) {
	const tok = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJl"
	want := sha256Key(tok)
	runKeyCases(t, ratelimit.ByBearerToken(), []keyCase{
		{"bearer", "192.0.2.1:1", []string{"Authorization: Bearer " + tok}, want},
		{"scheme case", "192.0.2.1:1", []string{"Authorization: bEaReR " + tok}, want},
		{"extra spaces", "192.0.2.1:1", []string{"Authorization: Bearer   " + tok}, want},
		{"token68 padding", "192.0.2.1:1", []string{"Authorization: Bearer abc+/~-._=="}, sha256Key("abc+/~-._==")},
		{"missing", "192.0.2.1:1", nil, ""},
		{"basic", "192.0.2.1:1", []string{"Authorization: Basic YWxhZGRpbjpvcGVuc2VzYW1l"}, ""},
		{"bearer no space", "192.0.2.1:1", []string{"Authorization: Bearer"}, ""},
		{"bearer empty", "192.0.2.1:1", []string{"Authorization: Bearer "}, ""},
		{"bearerx", "192.0.2.1:1", []string{"Authorization: Bearerx " + tok}, ""},
		{"space in token", "192.0.2.1:1", []string{"Authorization: Bearer a b"}, ""},
		{"padding in middle", "192.0.2.1:1", []string{"Authorization: Bearer a=b"}, ""},
		{"only padding", "192.0.2.1:1", []string{"Authorization: Bearer =="}, ""},
		{"NUL", "192.0.2.1:1", []string{"Authorization: Bearer ab\x00c"}, ""},
		{"high bytes", "192.0.2.1:1", []string{"Authorization: Bearer ab\xffc"}, ""},
		{"repeated", "192.0.2.1:1", []string{"Authorization: Bearer a", "Authorization: Bearer b"}, ""},
	})
	// Never the token in clear; stable across constructions (instances).
	k1, _ := ratelimit.ByBearerToken()(kfReq("192.0.2.1:1", "Authorization: Bearer "+tok))
	k2, _ := ratelimit.ByBearerToken()(kfReq("198.51.100.1:1", "Authorization: Bearer "+tok))
	if k1 != k2 || strings.Contains(k1, tok) || len(k1) != len("sha256:")+22 {
		t.Errorf("keys %q, %q", k1, k2)
	}

	secret := []byte("0123456789abcdef0123456789abcdef")
	kf := ratelimit.TokenConfig{Secret: secret}.KeyFunc()
	long := strings.Repeat("A", 5000) // more than the HMAC chunk
	runKeyCases(t, kf, []keyCase{
		{"hmac", "192.0.2.1:1", []string{"Authorization: Bearer " + tok}, hmacKey(secret, tok)},
		{"hmac long", "192.0.2.1:1", []string{"Authorization: Bearer " + long}, hmacKey(secret, long)},
	})
	r := kfReq("192.0.2.1:1", "Authorization: Bearer "+tok)
	plain := ratelimit.ByBearerToken()
	if a := testing.AllocsPerRun(100, func() { _, _ = plain(r) }); a > 1 {
		t.Errorf("ByBearerToken: %v allocs/op, want at most 1", a)
	}
	// HMAC states come from a sync.Pool, which the race detector randomly
	// empties: only check the count where pools keep what they are given.
	if poolsReliable() {
		if a := testing.AllocsPerRun(100, func() { _, _ = kf(r) }); a > 1 {
			t.Errorf("ByBearerToken HMAC: %v allocs/op, want at most 1", a)
		}
	}
	for _, secret := range [][]byte{[]byte("short"), {}} {
		if msg := kfPanics(func() { ratelimit.TokenConfig{Secret: secret}.KeyFunc() }); !strings.HasPrefix(msg, "ratelimit: TokenConfig.KeyFunc: Secret") {
			t.Errorf("secret of %d bytes: panic = %q", len(secret), msg)
		}
	}
	if msg := kfPanics(func() { ratelimit.TokenConfig{Header: "X API Key"}.KeyFunc() }); !strings.HasPrefix(msg, "ratelimit: TokenConfig.KeyFunc: invalid header") {
		t.Errorf("invalid header panic = %q", msg)
	}
	// The key function keeps its own copy of the secret: the caller's
	// buffer, reused or zeroed, changes no key.
	buf := append([]byte(nil), secret...)
	copied := ratelimit.TokenConfig{Secret: buf}.KeyFunc()
	clear(buf)
	if k, _ := copied(r); k != hmacKey(secret, tok) {
		t.Errorf("after the caller cleared its secret: key %q, want %q", k, hmacKey(secret, tok))
	}
}

// poolsReliable reports whether a sync.Pool hands back what was put in it,
// which is not so under the race detector.
func poolsReliable() bool {
	p := sync.Pool{New: func() any { return new([64]byte) }}
	return testing.AllocsPerRun(10, func() {
		for range 100 {
			p.Put(p.Get())
		}
	}) == 0
}

func TestByAPIKey(t *testing.T) {
	runKeyCases(t, ratelimit.ByAPIKey("X-API-Key"), []keyCase{
		{"present", "192.0.2.1:1", []string{"X-Api-Key: sk_live_abc123"}, sha256Key("sk_live_abc123")},
		{"missing", "192.0.2.1:1", nil, ""},
		{"empty", "192.0.2.1:1", []string{"X-Api-Key: "}, ""},
		{"repeated", "192.0.2.1:1", []string{"X-Api-Key: a", "X-Api-Key: b"}, ""},
		{"space", "192.0.2.1:1", []string{"X-Api-Key: a b"}, ""},
		{"NUL", "192.0.2.1:1", []string{"X-Api-Key: a\x00"}, ""},
		{"high bytes", "192.0.2.1:1", []string{"X-Api-Key: \xc3\xa9"}, ""},
	})
	// 1 MB keys are hashed like any other.
	big := strings.Repeat("k", 1<<20)
	k, err := ratelimit.ByAPIKey("X-API-Key")(kfReq("192.0.2.1:1", "X-API-Key: "+big))
	if err != nil || k != sha256Key(big) {
		t.Errorf("1 MB key = %q, %v", k, err)
	}
	if msg := kfPanics(func() { ratelimit.ByAPIKey("bad name") }); !strings.HasPrefix(msg, "ratelimit: ByAPIKey: invalid header name") {
		t.Errorf("panic = %q", msg)
	}
	// Authorization is allowed here: the whole value is hashed.
	if msg := kfPanics(func() { ratelimit.ByAPIKey("Authorization") }); msg != "" {
		t.Errorf("panic = %q", msg)
	}
}

func TestKeyFuncsConcurrent(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	kfs := []ratelimit.KeyFunc{
		ratelimit.ByIP(),
		ratelimit.ByClientIP("10.0.0.0/8"),
		ratelimit.TokenConfig{Secret: secret}.KeyFunc(),
		ratelimit.Keys(ratelimit.ByIP(), ratelimit.TokenConfig{Header: "X-API-Key", Secret: secret}.KeyFunc()),
	}
	r := kfReq("10.0.0.1:1", "X-Forwarded-For: 203.0.113.7", "Authorization: Bearer abc", "X-Api-Key: k")
	want := make([]string, len(kfs))
	for i, kf := range kfs {
		want[i], _ = kf(r)
	}
	done := make(chan struct{})
	for g := 0; g < 4; g++ {
		go func() {
			defer func() { done <- struct{}{} }()
			for n := 0; n < 200; n++ {
				for i, kf := range kfs {
					if k, err := kf(r); k != want[i] || err != nil {
						t.Errorf("concurrent key %d = %q, %v", i, k, err)
						return
					}
				}
			}
		}()
	}
	for g := 0; g < 4; g++ {
		<-done
	}
}

func BenchmarkTokenKeys(b *testing.B) {
	r := kfReq("192.0.2.1:1", "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJl")
	for name, kf := range map[string]ratelimit.KeyFunc{
		"sha256": ratelimit.ByBearerToken(),
		"hmac":   ratelimit.TokenConfig{Secret: []byte("0123456789abcdef")}.KeyFunc(),
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, _ = kf(r)
			}
		})
	}
}
