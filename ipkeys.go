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
// one bucket: use ByClientIP there.
//
// # Key format
//
// Every IP key function (ByIP, ByIPPrefix, ByClientIP,
// ClientIPConfig.KeyFunc) returns the same key format, so
// switching between them never changes how a client is counted:
//
//   - an IPv4 address as dotted quad, "192.0.2.1" (or its prefix, "192.0.2.0/24",
//     with ByIPPrefix or ClientIPConfig.IPv4Prefix);
//   - an IPv6 address grouped by its /64 prefix, "2001:db8:1:2::/64", because
//     one subscriber or one cloud VM commonly holds a whole /64 and could
//     otherwise rotate through 2^64 keys;
//   - IPv4-mapped IPv6 addresses ("::ffff:192.0.2.1") as plain IPv4, and IPv6
//     zones ("%eth0") dropped, so one client has exactly one key.
//
// An IPv4 key is a substring of the request (RemoteAddr or the header) and
// costs no allocation; an IPv6 or prefixed key allocates one small string.
//
// The port is stripped. A RemoteAddr that is not an IP address (a Unix
// socket, a request built by hand) gives an error wrapping ErrNoKey.
func ByIP() KeyFunc {
	return peerKey("ByIP", defaultIPv4Prefix, defaultIPv6Prefix)
}

// ByIPPrefix is ByIP with clients grouped by address prefix: the first
// ipv4Bits bits of an IPv4 address (1 to 32; ByIP uses 32, every address
// separately) and the first ipv6Bits bits of an IPv6 address (1 to 128; ByIP
// uses 64). Use ipv6Bits 128 to key every IPv6 address separately, 56 or 48
// to group whole customer sites. It panics if either is out of range.
func ByIPPrefix(ipv4Bits, ipv6Bits int) KeyFunc {
	if ipv4Bits < 1 || ipv4Bits > 32 {
		panic(fmt.Sprintf("ratelimit: ByIPPrefix: ipv4Bits %d must be 1 to 32", ipv4Bits))
	}
	if ipv6Bits < 1 || ipv6Bits > 128 {
		panic(fmt.Sprintf("ratelimit: ByIPPrefix: ipv6Bits %d must be 1 to 128", ipv6Bits))
	}
	return peerKey("ByIPPrefix", ipv4Bits, ipv6Bits)
}

func peerKey(fn string, v4, v6 int) KeyFunc {
	errPeer := fmt.Errorf("%w: %s: %v", ErrNoKey, fn, clientip.BadPeer)
	return func(r *http.Request) (string, error) {
		host, addr, canon, ok := clientip.ParseHostPort(r.RemoteAddr)
		if !ok {
			return "", errPeer
		}
		return clientip.Key(clientip.Node{Host: host, Addr: addr, Canon: canon}, v4, v6), nil
	}
}
