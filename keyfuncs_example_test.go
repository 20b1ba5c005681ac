package ratelimit_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/sluicehq/ratelimit"
)

// A server that clients reach directly: the key is the TCP peer, and headers
// are never read.
func ExampleByIP() {
	key := ratelimit.ByIP()

	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "192.0.2.1:52814"
	r.Header.Set("X-Forwarded-For", "198.51.100.1") // ignored
	fmt.Println(key(r))

	r.RemoteAddr = "[2001:db8:1:2:aaaa::1]:52814" // IPv6 is grouped by /64
	fmt.Println(key(r))

	r.RemoteAddr = "[::ffff:192.0.2.1]:52814" // IPv4-mapped is plain IPv4
	fmt.Println(key(r))
	// Output:
	// 192.0.2.1 <nil>
	// 2001:db8:1:2::/64 <nil>
	// 192.0.2.1 <nil>
}

// Key IPv4 clients by /24 and IPv6 clients by /56.
func ExampleClientIPConfig_peer() {
	key := ratelimit.ClientIPConfig{Source: ratelimit.SourcePeer, IPv4Prefix: 24, IPv6Prefix: 56}.KeyFunc()

	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "[2001:db8:1:2ff::1]:443"
	fmt.Println(key(r))
	r.RemoteAddr = "192.0.2.77:443"
	fmt.Println(key(r))
	// Output:
	// 2001:db8:1:200::/56 <nil>
	// 192.0.2.0/24 <nil>
}

// Behind a load balancer at 10.0.0.0/8 that appends the client's address to
// X-Forwarded-For. Whatever the client put in the header itself is to the
// left of that and never read.
func ExampleByClientIP() {
	key := ratelimit.ByClientIP("10.0.0.0/8")

	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "10.0.0.5:41000" // the load balancer
	// The client sent "X-Forwarded-For: 1.2.3.4" hoping for a fresh bucket;
	// the balancer appended the address it saw.
	r.Header.Set("X-Forwarded-For", "1.2.3.4, 203.0.113.7")
	fmt.Println(key(r))

	// A client connecting directly, bypassing the balancer, is keyed by its
	// own address: its headers are not believed.
	r.RemoteAddr = "198.51.100.1:41000"
	fmt.Println(key(r))
	// Output:
	// 203.0.113.7 <nil>
	// 198.51.100.1 <nil>
}

// Anything a trusted proxy passes along that is not an address fails closed:
// the error wraps ErrNoKey and the rule's key-error policy applies. Nothing
// is skipped and nothing falls back to another value.
func ExampleByClientIP_failClosed() {
	key := ratelimit.ByClientIP("10.0.0.0/8")

	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "10.0.0.5:41000"
	for _, xff := range []string{
		"203.0.113.7, unknown", // not an address
		"203.0.113.07",         // leading zero: not the standard form
		"10.0.0.9, 10.0.0.8",   // every member a trusted proxy
	} {
		r.Header.Set("X-Forwarded-For", xff)
		_, err := key(r)
		fmt.Println(err)
	}
	r.Header.Del("X-Forwarded-For")
	_, err := key(r)
	fmt.Println(err)
	// Output:
	// ratelimit: no key: ByClientIP: X-Forwarded-For: malformed address
	// ratelimit: no key: ByClientIP: X-Forwarded-For: malformed address
	// ratelimit: no key: ByClientIP: X-Forwarded-For: every address is a trusted proxy
	// ratelimit: no key: ByClientIP: X-Forwarded-For: header missing from a trusted proxy
}

// Read RFC 7239 Forwarded instead of X-Forwarded-For, and key IPv6 clients by
// their full address. Only a trusted proxy's header is read: a client
// connecting directly is keyed by its own address whatever it claims.
func ExampleClientIPConfig_KeyFunc() {
	key := ratelimit.ClientIPConfig{
		TrustedProxies: []string{"10.0.0.0/8", "2001:db8:ffff::/48"},
		Source:         ratelimit.SourceForwarded,
		IPv6Prefix:     128,
	}.KeyFunc()

	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "[2001:db8:ffff::2]:443"
	r.Header.Add("Forwarded", `for=192.0.2.43, for="[2001:db8:cafe::17]:4711";proto=https`)
	r.Header.Add("Forwarded", `for=10.0.0.3;by="[2001:db8:ffff::2]"`)
	r.Header.Set("X-Forwarded-For", "1.1.1.1") // not the configured source: ignored
	fmt.Println(key(r))

	direct := httptest.NewRequest("GET", "/", nil)
	direct.RemoteAddr = "198.51.100.20:5000" // not a trusted proxy
	direct.Header.Set("Forwarded", "for=192.0.2.99")
	fmt.Println(key(direct))

	r.Header.Set("Forwarded", "for=unknown") // from a trusted proxy: fails closed
	fmt.Println(key(r))
	// Output:
	// 2001:db8:cafe::17 <nil>
	// 198.51.100.20 <nil>
	//  ratelimit: no key: ClientIPConfig.KeyFunc: Forwarded: "unknown" address
}

// A server reachable only through one cloud load balancer whose addresses
// are not known in advance: the client is the rightmost X-Forwarded-For
// member.
func ExampleClientIPConfig_KeyFunc_hops() {
	key := ratelimit.ClientIPConfig{Hops: 1}.KeyFunc()

	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "172.31.5.9:41000"
	r.Header.Set("X-Forwarded-For", "1.2.3.4, 203.0.113.7")
	fmt.Println(key(r))
	// Output:
	// 203.0.113.7 <nil>
}

// Behind Cloudflare, which sets CF-Connecting-IP. Only requests from
// Cloudflare's published ranges are believed (two of them shown; list them
// all).
func ExampleClientIPConfig_KeyFunc_header() {
	key := ratelimit.ClientIPConfig{
		Source:         ratelimit.SourceHeader,
		Header:         "CF-Connecting-IP",
		TrustedProxies: []string{"173.245.48.0/20", "2400:cb00::/32"},
	}.KeyFunc()

	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "173.245.48.10:443"
	r.Header.Set("CF-Connecting-IP", "203.0.113.7")
	fmt.Println(key(r))

	r.RemoteAddr = "198.51.100.1:443" // not Cloudflare: the header is ignored
	fmt.Println(key(r))
	// Output:
	// 203.0.113.7 <nil>
	// 198.51.100.1 <nil>
}

// A route key from http.ServeMux: every user ID shares the route's bucket.
func ExampleByRoute() {
	key := ratelimit.ByRoute()

	mux := http.NewServeMux()
	mux.HandleFunc("GET /users/{id}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Println(key(r))
	})
	for _, path := range []string{"/users/1", "/users/2"} {
		mux.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", path, nil))
	}
	// Output:
	// GET /users/{id} <nil>
	// GET /users/{id} <nil>
}

type exampleUserKey struct{}

// A per-user, per-route key. The user comes from the request context, where
// authentication middleware put it.
func ExampleKeys() {
	user := func(r *http.Request) (string, bool) {
		id, ok := r.Context().Value(exampleUserKey{}).(string)
		return id, ok
	}
	key := ratelimit.Keys(ratelimit.ByUser(user), ratelimit.ByRoute())

	mux := http.NewServeMux()
	mux.HandleFunc("POST /orders", func(w http.ResponseWriter, r *http.Request) {
		fmt.Println(key(r))
	})
	r := httptest.NewRequest("POST", "/orders", nil)
	mux.ServeHTTP(httptest.NewRecorder(), r.WithContext(context.WithValue(r.Context(), exampleUserKey{}, "alice")))
	mux.ServeHTTP(httptest.NewRecorder(), r) // anonymous
	// Output:
	// 5:alice|12:POST /orders <nil>
	//  ratelimit: no key: ByUser: no authenticated user
}

// Bearer tokens are hashed: the key is stable across processes, and the
// token itself is never stored.
func ExampleByBearerToken() {
	key := ratelimit.ByBearerToken()

	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("Authorization", "Bearer s3cr3t-t0k3n")
	fmt.Println(key(r))

	// With a secret shared by every instance, low-entropy keys cannot be
	// recovered from the store by guessing.
	keyed := ratelimit.TokenConfig{Secret: []byte("0123456789abcdef0123456789abcdef")}.KeyFunc()
	fmt.Println(keyed(r))
	// Output:
	// sha256:bkS7POnO99ehFojMDxoOwg <nil>
	// hmac-sha256:5V0QLmypHKpKrW1a2vtytw <nil>
}

// A tenant header set by an API gateway in front of the server.
func ExampleByHeader() {
	key := ratelimit.ByHeader("X-Tenant-ID")

	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-Tenant-ID", "acme")
	fmt.Println(key(r))
	// Output:
	// acme <nil>
}
