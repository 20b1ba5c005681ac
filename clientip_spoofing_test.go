package ratelimit_test

import (
	"net/http"
	"testing"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
)

// The tests of this file each replay a published bypass of another
// limiter's client address against the key functions (see
// docs/security.md).

// TestClientIPHeaderFailsClosedWhenAClientCopySurvivesBesideTheProxys: a
// proxy that adds its X-Real-IP next to the client's own (Header.Add where
// Header.Set was meant, as in Fiber's BalancerForward, CVE-2026-45045)
// leaves two values, and whichever one a reader picks may be the
// client's. Here two values are no key at all: the request fails closed,
// whatever their order, their spelling or how they were joined. A
// look-alike header that canonicalises to another name is never read.
func TestClientIPHeaderFailsClosedWhenAClientCopySurvivesBesideTheProxys(t *testing.T) {
	kf := ratelimit.ClientIPConfig{Source: ratelimit.SourceHeader, Header: "X-Real-IP", TrustedProxies: []string{"10.0.0.0/8"}}.KeyFunc()
	const nginx = "10.0.0.1:1"
	runKeyCases(t, kf, []keyCase{
		{"the proxy's value alone", nginx, []string{"X-Real-IP: 203.0.113.7"}, "203.0.113.7"},
		{"client's copy, then the proxy's", nginx, []string{"X-Real-IP: 1.1.1.1", "X-Real-IP: 203.0.113.7"}, ""},
		{"the proxy's, then the client's copy", nginx, []string{"X-Real-IP: 203.0.113.7", "X-Real-IP: 1.1.1.1"}, ""},
		{"client's copy in lower case", nginx, []string{"x-real-ip: 1.1.1.1", "X-Real-IP: 203.0.113.7"}, ""},
		{"two identical values", nginx, []string{"X-Real-IP: 203.0.113.7", "X-Real-IP: 203.0.113.7"}, ""},
		{"joined with a comma", nginx, []string{"X-Real-IP: 1.1.1.1, 203.0.113.7"}, ""},
		{"joined with a space", nginx, []string{"X-Real-IP: 1.1.1.1 203.0.113.7"}, ""},
		{"underscore look-alike ignored", nginx, []string{"X_Real_IP: 1.1.1.1", "X-Real-IP: 203.0.113.7"}, "203.0.113.7"},
		{"client's copy alone, from a client", "198.51.100.4:1", []string{"X-Real-IP: 1.1.1.1"}, "198.51.100.4"},
	})

	reached := false
	h := ratelimit.New(ratelimit.PerHour(100), kf)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached = true }))
	req := ratelimittest.NewRequest("GET", "/", nginx, "X-Real-IP", "1.1.1.1")
	req.Header.Add("X-Real-IP", "203.0.113.7")
	if resp := ratelimittest.Do(h, req); resp.Code != 400 || reached {
		t.Fatalf("two X-Real-IP values: status %d, handler reached %v; want 400 before the handler", resp.Code, reached)
	}
}

// TestTrustedProxyRequestWithoutItsHeaderIsNeverKeyedByTheProxy: a client
// that names the forwarding header in Connection can make a proxy drop it
// as hop-by-hop (Traefik CVE-2024-45410, Fabio CVE-2025-48865), so the
// request arrives from a trusted proxy without the address the proxy
// should have written, or, behind a second proxy, with only the first
// proxy's address. Keying such a request by the proxy would put every
// client behind it in one bucket, or let them share the proxy's; it fails
// closed instead, and the key error policy answers (by default 400,
// before the handler).
func TestTrustedProxyRequestWithoutItsHeaderIsNeverKeyedByTheProxy(t *testing.T) {
	trusted := []string{"10.0.0.0/8"}
	const lb = "10.0.0.2:1"
	runKeyCases(t, ratelimit.ByClientIP(trusted...), []keyCase{
		{"X-Forwarded-For stripped", lb, []string{"Connection: X-Forwarded-For"}, ""},
		{"stripped before a second proxy", lb, []string{"X-Forwarded-For: 10.0.0.1"}, ""},
	})
	runKeyCases(t, ratelimit.ClientIPConfig{TrustedProxies: trusted, Source: ratelimit.SourceForwarded}.KeyFunc(), []keyCase{
		{"Forwarded stripped", lb, []string{"Connection: Forwarded", "X-Forwarded-For: 203.0.113.7"}, ""},
		{"stripped before a second proxy", lb, []string{"Forwarded: for=10.0.0.1"}, ""},
	})
	runKeyCases(t, ratelimit.ClientIPConfig{TrustedProxies: trusted, Source: ratelimit.SourceHeader, Header: "X-Real-IP"}.KeyFunc(), []keyCase{
		{"X-Real-IP stripped", lb, []string{"Connection: X-Real-IP", "X-Forwarded-For: 203.0.113.7"}, ""},
	})
	runKeyCases(t, ratelimit.ClientIPConfig{TrustedProxies: trusted, Hops: 1}.KeyFunc(), []keyCase{
		{"one hop, stripped", lb, []string{"Connection: X-Forwarded-For"}, ""},
	})
	runKeyCases(t, ratelimit.ClientIPConfig{TrustedProxies: trusted, Hops: 2}.KeyFunc(), []keyCase{
		{"two hops, the first stripped", lb, []string{"X-Forwarded-For: 10.0.0.1"}, ""},
	})

	reached := false
	h := ratelimit.New(ratelimit.PerHour(100), ratelimit.ByClientIP(trusted...))(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached = true }))
	if resp := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", lb, "Connection", "X-Forwarded-For")); resp.Code != 400 || reached {
		t.Fatalf("stripped header: status %d, handler reached %v; want 400 before the handler", resp.Code, reached)
	}
}

// TestIPv4MappedClientsKeepTheirOwnKeyInEveryNotation: express-rate-limit
// masked IPv4-mapped IPv6 addresses (::ffff:a.b.c.d, as a dual-stack
// socket reports IPv4 peers) with its IPv6 prefix, so every IPv4 client
// shared one bucket (CVE-2026-30827); its fix recognised the dotted
// notation only, and the hex spelling of the same address (::ffff:c000:201)
// still collapsed, while an ordinary IPv6 address that ends in a dotted
// quad was keyed by those 32 chosen bits. Here the key follows the
// address, not its spelling: a mapped address is its IPv4 address in any
// notation and under any IPv6 prefix, and other IPv6 addresses are their
// prefix.
func TestIPv4MappedClientsKeepTheirOwnKeyInEveryNotation(t *testing.T) {
	mapped := []keyCase{
		{"dotted", "[::ffff:192.0.2.1]:1", nil, "192.0.2.1"},
		{"hex", "[::ffff:c000:201]:1", nil, "192.0.2.1"},
		{"hex, upper case, leading zeros", "[::FFFF:C000:0201]:1", nil, "192.0.2.1"},
		{"written out", "[0:0:0:0:0:ffff:c000:201]:1", nil, "192.0.2.1"},
		{"another client", "[::ffff:c000:202]:1", nil, "192.0.2.2"},
		{"another client, dotted", "[::ffff:198.51.100.7]:1", nil, "198.51.100.7"},
	}
	runKeyCases(t, ratelimit.ByIP(), append(mapped,
		keyCase{"IPv6 ending in a dotted quad", "[2001:db8:1:2::192.0.2.1]:1", nil, "2001:db8:1:2::/64"},
		keyCase{"the same address in hex", "[2001:db8:1:2::c000:201]:1", nil, "2001:db8:1:2::/64"},
	))
	runKeyCases(t, ratelimit.ClientIPConfig{Source: ratelimit.SourcePeer, IPv4Prefix: 32, IPv6Prefix: 56}.KeyFunc(), append(mapped,
		keyCase{"IPv6 ending in a dotted quad", "[2001:db8:1:2::192.0.2.1]:1", nil, "2001:db8:1::/56"},
	))
	runKeyCases(t, ratelimit.ByClientIP("10.0.0.0/8"), []keyCase{
		{"forwarded hex", "10.0.0.1:1", []string{"X-Forwarded-For: ::ffff:c000:201"}, "192.0.2.1"},
		{"forwarded hex, another client", "10.0.0.1:1", []string{"X-Forwarded-For: ::ffff:c000:202"}, "192.0.2.2"},
		{"forwarded dotted suffix", "10.0.0.1:1", []string{"X-Forwarded-For: 2001:db8:1:2::192.0.2.1"}, "2001:db8:1:2::/64"},
	})
}
