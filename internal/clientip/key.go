package clientip

import "net/netip"

// Key formats the rate-limit key of n: the address itself when the prefix
// length covers the whole address ("192.0.2.1", "2001:db8::1"), else the
// masked prefix ("192.0.2.0/24", "2001:db8:1:2::/64").
//
// An IPv6 address that embeds an IPv4 client (in the well-known prefix
// 64:ff9b::/96 or one of nat's prefixes; nat may be nil) is keyed as that
// IPv4 address, with v4bits: behind a stateless translator every IPv4 client
// shares one /64, and grouping by it would give them one key.
//
// An IPv4 address whose Host is already canonical at /32 is returned as that
// substring, without allocating. Anything else allocates the one string.
func Key(n Node, v4bits, v6bits int, nat *Translators) string {
	a := n.Addr
	bits := v6bits
	if a.Is4() {
		if v4bits == 32 && n.Canon {
			return n.Host
		}
		bits = v4bits
	} else if v4, ok := nat.Embedded(a); ok {
		a, bits = v4, v4bits
	}
	var buf [64]byte
	var b []byte
	if bits == a.BitLen() {
		b = a.AppendTo(buf[:0])
	} else {
		b = netip.PrefixFrom(a, bits).Masked().AppendTo(buf[:0])
	}
	return string(b)
}
