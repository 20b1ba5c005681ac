package ratelimit

import (
	"fmt"
	"net/http"

	"github.com/sluicehq/ratelimit/internal/clientip"
)

const (
	defaultIPv4Prefix = 32
	defaultIPv6Prefix = 64
)

// ByIP keys requests by the address of the connecting peer,
// http.Request.RemoteAddr, and never reads a header.
//
// Use it when clients connect to the server directly. Behind a proxy or load
// balancer every request has the proxy's address, so all clients would share
// one bucket: use ByClientIP there. To group addresses by a prefix of
// another length or name a NAT64 prefix, use ClientIPConfig with
// SourcePeer.
//
// # Key format
//
// Every IP key function (ByIP, ByClientIP, ClientIPConfig.KeyFunc) returns
// the same key format, so switching between them never changes how a
// client is counted:
//
//   - an IPv4 address as dotted quad, "192.0.2.1" (or its prefix,
//     "192.0.2.0/24", with ClientIPConfig.IPv4Prefix);
//   - an IPv6 address grouped by its /64 prefix, "2001:db8:1:2::/64", because
//     one subscriber or one cloud VM commonly holds a whole /64 and could
//     otherwise rotate through 2^64 keys;
//   - IPv4-mapped IPv6 addresses ("::ffff:192.0.2.1") as plain IPv4, and IPv6
//     zones ("%eth0") dropped, so one client has exactly one key;
//   - an IPv4 client behind a stateless IPv4/IPv6 translator (SIIT, NAT64,
//     NAT46), which arrives as an address of RFC 6052's well-known prefix
//     ("64:ff9b::192.0.2.1"), as that IPv4 address: grouped by /64 like
//     other IPv6 addresses, every client of the translator would share one
//     key. Addresses of a network-specific translation prefix are keyed the
//     same way once named (ClientIPConfig.NAT64Prefixes); the local-use
//     prefix 64:ff9b:1::/48 (RFC 8215) is not translated unless named,
//     because where the IPv4 address sits in it depends on the prefix
//     length the network chose.
//
// An IPv4 key is a substring of the request (RemoteAddr or the header) and
// costs no allocation; an IPv6 or prefixed key allocates one small string.
// A peer key function remembers the keys of recent connections' addresses
// (a fixed number of them), so that the requests of a keep-alive
// connection, which share one RemoteAddr, parse it and allocate its key
// once; a remembered key is used only for an address equal to its own.
//
// The port is stripped. A RemoteAddr that is not an IP address (a Unix
// socket, a request built by hand) gives an error wrapping ErrNoKey.
func ByIP() KeyFunc { return byIP }

// byIP is every ByIP: one func value, so that stacked rules keyed by it
// share one key per request (see fastStack.take).
var byIP = peerKey("ByIP", defaultIPv4Prefix, defaultIPv6Prefix, nil)

// parseNAT64 parses the NAT64Prefixes of a key config, panicking with fn's
// name on an invalid one.
func parseNAT64(fn string, prefixes []string) *clientip.Translators {
	nat, err := clientip.ParseTranslators(prefixes)
	if err != nil {
		panic(fmt.Sprintf("ratelimit: %s: NAT64Prefixes: %v", fn, err))
	}
	return &nat
}

// peerKey is the KeyFunc of the peer's address, RemoteAddr, grouped by the
// prefix lengths v4 and v6, with nat's translators. The keys of recent
// addresses are cached (see clientip.PeerCache), so that a connection's
// requests parse its address once: a key depends on the address's text
// alone.
func peerKey(fn string, v4, v6 int, nat *clientip.Translators) KeyFunc {
	errPeer := fmt.Errorf("%w: %s: %v", ErrNoKey, fn, clientip.BadPeer)
	cache := new(clientip.PeerCache)
	return func(r *http.Request) (string, error) {
		if key, ok := cache.Get(r.RemoteAddr); ok {
			return key, nil
		}
		host, addr, canon, ok := clientip.ParseHostPort(r.RemoteAddr)
		if !ok {
			return "", errPeer
		}
		key := clientip.Key(clientip.Node{Host: host, Addr: addr, Canon: canon}, v4, v6, nat)
		cache.Put(r.RemoteAddr, key)
		return key, nil
	}
}
