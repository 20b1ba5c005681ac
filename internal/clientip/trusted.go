package clientip

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// Set is a set of trusted proxy addresses: IPv4 and IPv6 prefixes. The zero
// Set is empty and trusts nothing. A Set is immutable once built and safe for
// concurrent use.
type Set struct {
	prefixes []netip.Prefix
}

// ParseSet builds a Set from CIDR prefixes ("10.0.0.0/8", "2001:db8::/32") and
// single addresses ("192.0.2.10", "::1"). It rejects, with an error naming the
// entry:
//   - anything netip cannot parse, and empty entries;
//   - prefixes with host bits set ("10.0.0.1/8"), which usually mean a typo;
//   - zones ("fe80::1%eth0"): zones are dropped from candidate addresses, so a
//     zoned entry would trust that address on every interface;
//   - prefixes that cover a whole address family ("0.0.0.0/0", "::/0"),
//     which would let every client choose its own key.
//
// IPv4-mapped IPv6 entries ("::ffff:10.0.0.0/104") are converted to IPv4,
// because candidate addresses are unmapped before they are checked.
func ParseSet(entries []string) (Set, error) {
	s := Set{prefixes: make([]netip.Prefix, 0, len(entries))}
	for _, e := range entries {
		p, err := parseEntry(e)
		if err != nil {
			return Set{}, err
		}
		s.prefixes = append(s.prefixes, p)
	}
	return s, nil
}

func parseEntry(e string) (netip.Prefix, error) {
	if strings.TrimSpace(e) == "" {
		return netip.Prefix{}, errors.New("empty trusted proxy entry")
	}
	if strings.IndexByte(e, '%') >= 0 {
		return netip.Prefix{}, fmt.Errorf("trusted proxy %q has a zone; zones are not supported", e)
	}
	var p netip.Prefix
	if strings.IndexByte(e, '/') >= 0 {
		var err error
		p, err = netip.ParsePrefix(e)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("invalid trusted proxy %q: %v", e, err)
		}
		if p.Masked() != p {
			return netip.Prefix{}, fmt.Errorf("trusted proxy %q has host bits set; did you mean %s?", e, p.Masked())
		}
	} else {
		a, err := netip.ParseAddr(e)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("invalid trusted proxy %q: %v", e, err)
		}
		p = netip.PrefixFrom(a, a.BitLen())
	}
	if p.Addr().Is4In6() {
		if p.Bits() < 96 {
			return netip.Prefix{}, fmt.Errorf("trusted proxy %q mixes IPv4-mapped and IPv6 addresses", e)
		}
		p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
	}
	if p.Bits() == 0 {
		return netip.Prefix{}, fmt.Errorf("trusted proxy %q trusts every address, which lets any client choose its key", e)
	}
	return p, nil
}

// Len returns the number of prefixes in s.
func (s *Set) Len() int { return len(s.prefixes) }

// Contains reports whether a, which must already be unmapped and zone-free,
// is in s.
func (s *Set) Contains(a netip.Addr) bool {
	for _, p := range s.prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
