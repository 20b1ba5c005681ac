// Package clientip parses peer addresses and the proxy headers that carry a
// client's address (X-Forwarded-For, RFC 7239 Forwarded, single-address
// headers such as X-Real-IP), strictly and without allocating in proportion to
// the input.
//
// Everything here fails closed: a value that is not exactly an IP address in
// its standard text form (optionally with a port, brackets or a zone, as the
// header's syntax allows) is rejected, never repaired, skipped or guessed at.
// Addresses are normalised before anyone compares them: IPv4-mapped IPv6
// addresses are unmapped and IPv6 zones are dropped.
//
// The package is internal to github.com/sluicehq/ratelimit; the public, documented
// API is ratelimit.ByIP, ratelimit.ByClientIP and friends.
package clientip

import (
	"net/netip"
	"strings"
)

// maxZoneLen bounds an IPv6 zone ("eth0", "12"). Interface names are at most
// 15 bytes on Linux; Windows zones are small integers.
const maxZoneLen = 32

// maxIPLen bounds the text of an address without zone, brackets or port:
// "ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255" is 45 bytes.
const maxIPLen = 45

// ParseIP parses s, which must be exactly an IP address in standard form: a
// dotted-quad IPv4 address with four decimal octets and no leading zeros, or
// an IPv6 address, optionally with a %zone. No brackets, no port, no
// whitespace.
//
// The zone is dropped and an IPv4-mapped IPv6 address is unmapped. The
// unspecified addresses 0.0.0.0 and :: are rejected: no client has them.
//
// canon reports whether s itself is the canonical text of the returned
// address, so that callers can use s as a key without formatting (and without
// allocating). It is true exactly for IPv4 addresses parsed as such.
//
// ParseIP does not allocate.
func ParseIP(s string) (addr netip.Addr, canon, ok bool) {
	if s == "" {
		return netip.Addr{}, false, false
	}
	if a, n, ok4 := parseDottedQuad(s); ok4 {
		if n != len(s) {
			return netip.Addr{}, false, false
		}
		return v4(a)
	}
	if i := strings.IndexByte(s, '%'); i >= 0 {
		// A zone is only meaningful on IPv6 and never part of the identity of
		// a client. Validate it, drop it, and parse the address alone (which
		// also keeps netip from interning attacker-chosen zone strings).
		if !validZone(s[i+1:]) || strings.IndexByte(s[:i], ':') < 0 {
			return netip.Addr{}, false, false
		}
		s = s[:i]
		canon = false
	} else {
		canon = true
	}
	if len(s) > maxIPLen || !ipChars(s) {
		return netip.Addr{}, false, false
	}
	addr, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, false, false
	}
	if addr.Is4In6() {
		addr = addr.Unmap()
		canon = false
	} else if addr.Is6() {
		canon = false
	}
	if addr.IsUnspecified() {
		return netip.Addr{}, false, false
	}
	return addr, canon, true
}

// ipChars reports whether s holds only characters that can appear in an IP
// address, so that obvious garbage is rejected before netip builds an error.
func ipChars(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case '0' <= c && c <= '9', 'a' <= c && c <= 'f', 'A' <= c && c <= 'F', c == '.', c == ':':
		default:
			return false
		}
	}
	return true
}

// validZone reports whether z is a plausible IPv6 zone: 1 to 32 bytes of
// letters, digits and "-._~".
func validZone(z string) bool {
	if z == "" || len(z) > maxZoneLen {
		return false
	}
	for i := 0; i < len(z); i++ {
		c := z[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '.', c == '_', c == '~':
		default:
			return false
		}
	}
	return true
}

// validPort reports whether p is a decimal port number, 0 to 65535, at most
// five digits.
func validPort(p string) bool {
	if p == "" || len(p) > 5 {
		return false
	}
	n := 0
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c < '0' || c > '9' {
			return false
		}
		n = n*10 + int(c-'0')
	}
	return n <= 65535
}

// ParseHostPort parses an address as it appears in http.Request.RemoteAddr, an
// X-Forwarded-For member or a single-address header: "192.0.2.1",
// "192.0.2.1:8080", "2001:db8::1", "[2001:db8::1]" or "[2001:db8::1]:8080",
// each IPv6 form optionally with a %zone. The address part must satisfy
// ParseIP; a port must be decimal.
//
// host is the address part of s (a substring of s, without zone); canon reports whether host
// is the canonical text of addr. ParseHostPort does not allocate.
func ParseHostPort(s string) (host string, addr netip.Addr, canon, ok bool) {
	if s == "" {
		return "", netip.Addr{}, false, false
	}
	if a, n, ok4 := parseDottedQuad(s); ok4 {
		// The fast path for the common case: "192.0.2.1" or "192.0.2.1:80".
		// Nothing else can start with a dotted quad.
		if n != len(s) && (s[n] != ':' || !validPort(s[n+1:])) {
			return "", netip.Addr{}, false, false
		}
		addr, canon, ok = v4(a)
		if !ok {
			return "", netip.Addr{}, false, false
		}
		return s[:n], addr, canon, true
	}
	if s[0] == '[' {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", netip.Addr{}, false, false
		}
		host = s[1:end]
		if rest := s[end+1:]; rest != "" {
			if rest[0] != ':' || !validPort(rest[1:]) {
				return "", netip.Addr{}, false, false
			}
		}
		if strings.IndexByte(host, ':') < 0 {
			return "", netip.Addr{}, false, false // brackets are for IPv6 only
		}
	} else {
		host = s
		if i := strings.IndexByte(s, ':'); i >= 0 && strings.IndexByte(s[i+1:], ':') < 0 {
			// Exactly one colon: IPv4 with a port. (Two or more: bare IPv6.)
			host = s[:i]
			if !validPort(s[i+1:]) || strings.IndexByte(host, '.') < 0 {
				return "", netip.Addr{}, false, false
			}
		}
	}
	addr, canon, ok = ParseIP(host)
	if !ok {
		return "", netip.Addr{}, false, false
	}
	if i := strings.IndexByte(host, '%'); i >= 0 {
		host = host[:i]
	}
	return host, addr, canon, true
}

// parseDottedQuad parses the strict dotted-quad IPv4 address at the start of
// s: four decimal octets of one to three digits, no leading zeros, at most
// 255. It returns the address and its length in bytes, or ok false if s does
// not start with one. It accepts exactly what netip.ParseAddr accepts as
// IPv4, faster. What follows the address is the caller's to check: in
// "192.0.2.01" the address is "192.0.2.0", followed by "1".
func parseDottedQuad(s string) (a [4]byte, n int, ok bool) {
	for k := range a {
		if k > 0 {
			if n == len(s) || s[n] != '.' {
				return a, 0, false
			}
			n++
		}
		// An octet: a zero, or one to three digits not starting with
		// zero, at most 255; the digits of one are read while they come.
		if n == len(s) || s[n]-'0' > 9 {
			return a, 0, false
		}
		v := uint(s[n] - '0')
		n++
		if v != 0 && n < len(s) && s[n]-'0' <= 9 {
			v = v*10 + uint(s[n]-'0')
			n++
			if n < len(s) && s[n]-'0' <= 9 {
				if v = v*10 + uint(s[n]-'0'); v > 255 {
					return a, 0, false
				}
				n++
			}
		}
		a[k] = byte(v)
	}
	return a, n, true
}

// v4 returns the IPv4 address a, rejecting 0.0.0.0.
func v4(a [4]byte) (netip.Addr, bool, bool) {
	if a == [4]byte{} {
		return netip.Addr{}, false, false
	}
	return netip.AddrFrom4(a), true, true
}
