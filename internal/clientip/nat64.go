package clientip

import (
	"fmt"
	"net/netip"
	"strings"
)

// WellKnownPrefix is RFC 6052's well-known prefix, 64:ff9b::/96: a stateless
// translator (SIIT, NAT64, NAT46) writes the IPv4 client 192.0.2.1 as
// 64:ff9b::c000:201 (64:ff9b::192.0.2.1), in its last 32 bits.
var WellKnownPrefix = netip.MustParsePrefix("64:ff9b::/96")

// MaxTranslators bounds the network-specific prefixes of a Translators,
// each of which is compared against every IPv6 address keyed.
const MaxTranslators = 16

// Translators is a set of IPv4/IPv6 translation prefixes (RFC 6052): IPv6
// prefixes whose addresses stand for an IPv4 host, which they embed. The
// well-known prefix is always in the set; ParseTranslators adds the
// network-specific prefixes an operator names. The zero Translators (or a
// nil one) holds the well-known prefix alone. Immutable once built.
type Translators struct {
	prefixes []netip.Prefix // network-specific; disjoint, from each other and from WellKnownPrefix
}

// ParseTranslators builds a Translators from network-specific prefixes
// ("2001:db8:64::/96", "64:ff9b:1:abcd::/64"). Each must be an IPv6 prefix of
// one of the lengths RFC 6052 defines (32, 40, 48, 56, 64 or 96 bits), without
// host bits, a zone or an IPv4-mapped address, and prefixes must not overlap
// (an address would embed two different IPv4 addresses). Naming the
// well-known prefix itself is allowed and changes nothing. At most
// MaxTranslators prefixes.
func ParseTranslators(entries []string) (Translators, error) {
	if len(entries) > MaxTranslators {
		return Translators{}, fmt.Errorf("%d translation prefixes, at most %d", len(entries), MaxTranslators)
	}
	var t Translators
	for _, e := range entries {
		p, err := parseTranslator(e)
		if err != nil {
			return Translators{}, err
		}
		if p == WellKnownPrefix {
			continue
		}
		if p.Overlaps(WellKnownPrefix) {
			return Translators{}, fmt.Errorf("translation prefix %q overlaps the well-known prefix %s", e, WellKnownPrefix)
		}
		for _, q := range t.prefixes {
			if p.Overlaps(q) {
				return Translators{}, fmt.Errorf("translation prefix %q overlaps %s", e, q)
			}
		}
		t.prefixes = append(t.prefixes, p)
	}
	return t, nil
}

func parseTranslator(e string) (netip.Prefix, error) {
	if strings.IndexByte(e, '%') >= 0 {
		return netip.Prefix{}, fmt.Errorf("translation prefix %q has a zone", e)
	}
	p, err := netip.ParsePrefix(e)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("invalid translation prefix %q: %v", e, err)
	}
	if !p.Addr().Is6() || p.Addr().Is4In6() {
		return netip.Prefix{}, fmt.Errorf("translation prefix %q is not an IPv6 prefix", e)
	}
	if p.Masked() != p {
		return netip.Prefix{}, fmt.Errorf("translation prefix %q has host bits set; did you mean %s?", e, p.Masked())
	}
	switch p.Bits() {
	case 32, 40, 48, 56, 64, 96:
	default:
		return netip.Prefix{}, fmt.Errorf("translation prefix %q: RFC 6052 defines lengths 32, 40, 48, 56, 64 and 96, not %d", e, p.Bits())
	}
	return p, nil
}

// Embedded returns the IPv4 address that a, an IPv6 address, embeds when it
// is in one of t's prefixes (or the well-known prefix); ok is false for any
// other address. t may be nil.
func (t *Translators) Embedded(a netip.Addr) (v4 netip.Addr, ok bool) {
	if WellKnownPrefix.Contains(a) {
		return embedded(a, 96), true
	}
	if t == nil {
		return netip.Addr{}, false
	}
	for _, p := range t.prefixes {
		if p.Contains(a) {
			return embedded(a, p.Bits()), true
		}
	}
	return netip.Addr{}, false
}

// embedded extracts the IPv4 address that follows a prefix of bits bits in
// a, as RFC 6052 (section 2.2) lays it out: the 32 bits right after the
// prefix, skipping bits 64 to 71 (the "u" octet, always zero).
func embedded(a netip.Addr, bits int) netip.Addr {
	b := a.As16()
	var v [4]byte
	j := bits / 8
	for i := range v {
		if j == 8 {
			j++
		}
		v[i] = b[j]
		j++
	}
	return netip.AddrFrom4(v)
}
