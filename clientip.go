package ratelimit

import (
	"cmp"
	"fmt"
	"net/http"

	"github.com/sluicehq/ratelimit/internal/clientip"
)

const (
	defaultMaxMembers = 32
	maxMaxMembers     = 1024
)

// ClientIPSource selects where a client IP key function reads the client's
// address: the one header it reads, or none (SourcePeer). Exactly one source
// is read per key function: when a request carries several (X-Forwarded-For
// and Forwarded, say), the others are ignored, never consulted as a
// fallback, so that a client cannot pick the header that suits it.
type ClientIPSource uint8

const (
	// SourceXForwardedFor reads X-Forwarded-For: comma-separated addresses,
	// each proxy appending the address of its peer. The default, because it
	// is what nearly every load balancer, CDN and reverse proxy sets.
	SourceXForwardedFor ClientIPSource = iota

	// SourceForwarded reads RFC 7239 Forwarded: comma-separated elements such
	// as `for=192.0.2.60;proto=https`, each proxy appending one; the address
	// is the for= parameter, `for="[2001:db8::1]:4711"` for IPv6.
	SourceForwarded

	// SourceHeader reads a header holding exactly one address, which the edge
	// proxy sets (overwriting whatever the client sent): X-Real-IP (nginx),
	// CF-Connecting-IP (Cloudflare), True-Client-IP (Akamai, Cloudflare
	// Enterprise), Fastly-Client-IP.
	SourceHeader

	// SourcePeer reads no header: the client is the connecting peer
	// (RemoteAddr), as with ByIP, for a server that clients reach directly;
	// it groups addresses by IPv4Prefix and IPv6Prefix and translates
	// NAT64Prefixes. TrustedProxies, Header, Hops and MaxMembers must be
	// unset.
	SourcePeer
)

// ClientIPConfig configures a key function for the client address: its
// KeyFunc method is the general form of ByIP and ByClientIP, and the one for
// a single-address header set by your edge (Source: SourceHeader), a fixed
// chain of proxies (Hops), or the connecting peer grouped by another prefix
// or behind a NAT64 translator (Source: SourcePeer):
//
//	// Behind Cloudflare, which overwrites CF-Connecting-IP:
//	ratelimit.ClientIPConfig{
//		Source:         ratelimit.SourceHeader,
//		Header:         "CF-Connecting-IP",
//		TrustedProxies: cloudflareRanges,
//	}.KeyFunc()
//
//	// Clients connecting directly, each customer site (/56) one client:
//	ratelimit.ClientIPConfig{Source: ratelimit.SourcePeer, IPv6Prefix: 56}.KeyFunc()
//
// # Trust model
//
// Proxy headers are written by whoever sent the request, so they prove
// nothing by themselves: a client can send "X-Forwarded-For: 1.2.3.4" and a
// proxy appends to it ("1.2.3.4, <client's real address>"). Only two things
// can be trusted: the connecting peer (RemoteAddr, from the TCP connection)
// and what a trusted proxy added. Hence:
//
//   - If the peer is not in TrustedProxies, headers are ignored and the key is
//     the peer's address, exactly as ByIP. (With Hops and no TrustedProxies,
//     the peer is not checked; see Hops.)
//   - Otherwise the list header is walked from the right, the end the
//     proxies appended to. Members that are trusted proxies are skipped; the
//     first untrusted member is the client. Members to its left are
//     client-supplied and never read.
//   - Each member is normalised (IPv4-mapped unmapped, zone dropped) before
//     the trust check, so "::ffff:10.0.0.1" is trusted exactly when 10.0.0.1
//     is.
//
// # What fails closed
//
// The key function returns an error wrapping ErrNoKey, and the rule's key
// error policy applies (see OnKeyError), when, from a trusted peer:
//
//   - the header is missing;
//   - a member that has to be examined is not exactly an address:
//     "unknown", an obfuscated identifier ("_hidden"), a hostname, garbage,
//     NUL or non-ASCII bytes, leading zeros ("010.0.0.1"), hex or octal
//     octets, short forms ("10.1"), out-of-range octets, a Forwarded element
//     without for=, a quoting error. It is never skipped: skipping would let a
//     client slip its own value past a proxy that wrote garbage;
//   - every member is a trusted proxy, so there is no client address (the
//     request came from inside the trusted network, or a proxy did not
//     append the client's address). Guessing here, by taking the leftmost
//     member or the peer, would either let anyone who can reach the app
//     through a pass-through proxy choose a trusted address per request, or
//     lump unrelated clients together;
//   - more than MaxMembers members are trusted proxies or empty.
//
// Empty list elements ("198.51.100.9, , 10.0.0.3", an empty header line) are
// ignored, as RFC 9110 (section 5.6.1.2) requires of recipients: they are
// never an address and never a reason to fail, but each counts against
// MaxMembers. A header of nothing but empty elements counts as missing.
//
// Nothing falls back: not to the leftmost member, not to another header, and
// not to the trusted peer's own address. A single-address header
// (SourceHeader) fails closed when it is missing, repeated on several lines,
// or not one address. A RemoteAddr that is not an IP address (a Unix socket)
// fails closed whatever the headers say.
//
// # Bounded work
//
// The header is read from its end, a member at a time, without splitting it:
// no allocation depends on its size, at most MaxMembers members are parsed,
// and only the bytes of those members are read. A 100 KB header of 10,000
// members costs no more than its last MaxMembers members.
type ClientIPConfig struct {
	// TrustedProxies lists the proxies whose headers are believed: CIDR
	// prefixes ("10.0.0.0/8", "2001:db8::/32") or single addresses
	// ("192.0.2.10", "::1"), IPv4 or IPv6. List exactly your own proxies (or
	// your CDN's published ranges), as narrowly as you can: every address
	// listed here is an address whose X-Forwarded-For claims are believed.
	//
	// Required, except with Hops, and not allowed with SourcePeer. Invalid
	// entries panic: unparsable ones, prefixes with host bits set
	// ("10.0.0.1/8"), zones, and /0.
	TrustedProxies []string

	// Source is the one header read, or SourcePeer for none;
	// SourceXForwardedFor by default.
	Source ClientIPSource

	// Header is the name of the header. Required with SourceHeader
	// ("X-Real-IP", "CF-Connecting-IP"); with SourceXForwardedFor and
	// SourceForwarded it defaults to "X-Forwarded-For" and "Forwarded", and
	// can name another header of the same format.
	Header string

	// Hops, when positive, replaces the trust walk: the client is the Hops-th
	// member from the right, for a fixed chain of Hops proxies (1 for a
	// single load balancer, which appends your client's address as the
	// rightmost member). Use it when the proxies' own addresses are not
	// known in advance (cloud load balancers). The members to the right of
	// it must still be valid addresses, and fewer than Hops members fail
	// closed.
	//
	// If TrustedProxies is empty the peer is not checked, so the server must
	// be unreachable except through that chain (a firewall or private
	// network); otherwise a client connecting directly chooses its key. If
	// TrustedProxies is set, a peer outside it is keyed by its own address.
	Hops int

	// MaxMembers caps the members examined, empty list elements included
	// (default 32, at most 1024). A request needing more fails closed. Real
	// chains have a handful.
	MaxMembers int

	// IPv4Prefix and IPv6Prefix group client addresses by prefix: the first
	// IPv4Prefix bits of an IPv4 address (1 to 32) and the first IPv6Prefix
	// bits of an IPv6 address (1 to 128, such as 128 to key every IPv6
	// address separately, 56 or 48 to group whole customer sites). 0 means
	// 32 and 64, as ByIP and ByClientIP (see "Key format" at ByIP).
	IPv4Prefix, IPv6Prefix int

	// NAT64Prefixes names the network-specific IPv4/IPv6 translation
	// prefixes (RFC 6052) of the translators in front of the server, such
	// as "2001:db8:64::/96" or "64:ff9b:1::/96" (a local-use prefix, RFC
	// 8215). An address in one of them, the client's or an untrusted
	// peer's, stands for an IPv4 client and is keyed by the IPv4 address it
	// embeds, with IPv4Prefix. The well-known prefix 64:ff9b::/96 is always
	// translated and need not be named. Which proxies are trusted is decided
	// on the address as it arrives, never on the IPv4 address it embeds.
	//
	// Each must be an IPv6 prefix of 32, 40, 48, 56, 64 or 96 bits (the
	// lengths RFC 6052 defines) without host bits, and none may overlap
	// another or the well-known prefix; at most 16. KeyFunc panics
	// otherwise.
	NAT64Prefixes []string
}

type clientIPMode uint8

const (
	modeRightmostUntrusted clientIPMode = iota
	modeHops
	modeSingle
)

// KeyFunc returns a KeyFunc for the client address that cfg's proxies
// report, or with SourcePeer for the connecting peer's (as ByIP, grouped
// and translated as cfg says). This is a security boundary: the key decides whose budget a
// request spends, and a client that can choose its key can spend another
// client's budget or escape its own. Read the trust model at ClientIPConfig
// before using it; in short:
//
//   - Only the connecting peer (RemoteAddr) and what a trusted proxy appended
//     are believed. A peer outside TrustedProxies is keyed by its own
//     address and its headers are ignored.
//   - List exactly your own proxies in TrustedProxies, as narrowly as you
//     can: every address listed is one whose header claims are believed.
//     Listing a range your clients can connect from lets them choose their
//     key.
//   - Hops without TrustedProxies does not check the peer at all: use it only
//     when no client can reach the server except through that chain.
//   - Anything unexpected from a trusted peer (a missing header, a member
//     that is not exactly an address, no untrusted member, too many members)
//     fails closed with an error wrapping ErrNoKey, and the rule's key error
//     policy applies; nothing falls back to another header or address.
//
// The work per request is bounded by MaxMembers whatever the header's size.
// KeyFunc panics with a "ratelimit: ClientIPConfig.KeyFunc: ..." message on
// an invalid configuration, so that a misconfigured limiter never starts.
func (cfg ClientIPConfig) KeyFunc() KeyFunc {
	return cfg.keyFunc("ClientIPConfig.KeyFunc")
}

// ByClientIP keys requests by the client address reported by trusted proxies
// in X-Forwarded-For: the rightmost address in the header that is not one of
// trustedProxies. Requests from a peer that is not a trusted proxy are keyed
// by the peer's address, and their headers ignored.
//
// trustedProxies are CIDR prefixes or single addresses, IPv4 or IPv6:
//
//	ratelimit.ByClientIP("10.0.0.0/8")        // your load balancers
//	ratelimit.ByClientIP(cloudflareRanges...) // a CDN's published ranges
//
// See ClientIPConfig for the trust model and what fails closed, and its
// KeyFunc method to read RFC 7239 Forwarded instead, or to group addresses by
// another prefix. ByClientIP panics with a "ratelimit: ByClientIP: ..." message
// if trustedProxies is empty or holds an invalid entry.
func ByClientIP(trustedProxies ...string) KeyFunc {
	return ClientIPConfig{TrustedProxies: trustedProxies}.keyFunc("ByClientIP")
}

// peerKeyFunc is the KeyFunc of a SourcePeer cfg, panicking with fn's name
// on an invalid one.
func (cfg ClientIPConfig) peerKeyFunc(fn string) KeyFunc {
	if len(cfg.TrustedProxies) > 0 || cfg.Header != "" || cfg.Hops != 0 || cfg.MaxMembers != 0 {
		panic(fmt.Sprintf("ratelimit: %s: SourcePeer reads no header: TrustedProxies, Header, Hops and MaxMembers must be unset", fn))
	}
	v4, v6 := cmp.Or(cfg.IPv4Prefix, defaultIPv4Prefix), cmp.Or(cfg.IPv6Prefix, defaultIPv6Prefix)
	if v4 < 1 || v4 > 32 {
		panic(fmt.Sprintf("ratelimit: %s: IPv4Prefix %d must be 1 to 32", fn, v4))
	}
	if v6 < 1 || v6 > 128 {
		panic(fmt.Sprintf("ratelimit: %s: IPv6Prefix %d must be 1 to 128", fn, v6))
	}
	return peerKey(fn, v4, v6, parseNAT64(fn, cfg.NAT64Prefixes))
}

// clientIPPlan is a validated ClientIPConfig.
type clientIPPlan struct {
	trusted                  clientip.Set
	src                      clientip.Source
	mode                     clientIPMode
	header                   string // canonical
	v4, v6, maxMembers, hops int
	nat                      *clientip.Translators
}

// keyFunc validates cfg, panicking with fn's name, and returns its KeyFunc.
func (cfg ClientIPConfig) keyFunc(fn string) KeyFunc {
	if cfg.Source == SourcePeer {
		return cfg.peerKeyFunc(fn)
	}
	fail := func(format string, args ...any) {
		panic(fmt.Sprintf("ratelimit: %s: ", fn) + fmt.Sprintf(format, args...))
	}
	p := cfg.plan(fail)

	// Errors are built once, so that failing closed does not allocate either.
	var errs [clientip.NumReasons]error
	for r := range errs {
		subject := p.header
		if clientip.Reason(r) == clientip.BadPeer {
			subject = "RemoteAddr"
		}
		errs[r] = fmt.Errorf("%w: %s: %s: %v", ErrNoKey, fn, subject, clientip.Reason(r))
	}
	checkPeer := p.trusted.Len() > 0

	return func(r *http.Request) (string, error) {
		host, addr, canon, ok := clientip.ParseHostPort(r.RemoteAddr)
		if !ok {
			return "", errs[clientip.BadPeer]
		}
		if checkPeer && !p.trusted.Contains(addr) {
			return clientip.Key(clientip.Node{Host: host, Addr: addr, Canon: canon}, p.v4, p.v6, p.nat), nil
		}
		lines := r.Header.Values(p.header)
		var (
			n      clientip.Node
			reason clientip.Reason
		)
		switch p.mode {
		case modeRightmostUntrusted:
			n, reason = clientip.RightmostUntrusted(p.src, lines, &p.trusted, p.maxMembers)
		case modeHops:
			n, reason = clientip.NthFromRight(p.src, lines, p.hops, p.maxMembers)
		default:
			n, reason = clientip.Single(lines)
		}
		if reason != clientip.OK {
			return "", errs[reason]
		}
		return clientip.Key(n, p.v4, p.v6, p.nat), nil
	}
}

// plan validates cfg and fills in its defaults, calling fail (which panics)
// on the first error.
func (cfg ClientIPConfig) plan(fail func(format string, args ...any)) clientIPPlan {
	trusted, err := clientip.ParseSet(cfg.TrustedProxies)
	if err != nil {
		fail("%v", err)
	}
	p := clientIPPlan{trusted: trusted, v4: cfg.IPv4Prefix, v6: cfg.IPv6Prefix, maxMembers: cfg.MaxMembers, hops: cfg.Hops}
	if p.maxMembers == 0 {
		p.maxMembers = defaultMaxMembers
	}
	if p.maxMembers < 1 || p.maxMembers > maxMaxMembers {
		fail("MaxMembers %d must be 1 to %d", p.maxMembers, maxMaxMembers)
	}
	if p.v4 == 0 {
		p.v4 = defaultIPv4Prefix
	}
	if p.v6 == 0 {
		p.v6 = defaultIPv6Prefix
	}
	if p.v4 < 1 || p.v4 > 32 {
		fail("IPv4Prefix %d must be 1 to 32", p.v4)
	}
	if p.v6 < 1 || p.v6 > 128 {
		fail("IPv6Prefix %d must be 1 to 128", p.v6)
	}
	if p.hops < 0 || p.hops > p.maxMembers {
		fail("Hops %d must be 0 (walk the trusted proxies) or 1 to MaxMembers (%d)", p.hops, p.maxMembers)
	}
	nat, err := clientip.ParseTranslators(cfg.NAT64Prefixes)
	if err != nil {
		fail("NAT64Prefixes: %v", err)
	}
	p.nat = &nat
	p.header = cfg.source(&p, fail)
	if !validHeaderName(p.header) {
		fail("invalid header name %q", p.header)
	}
	p.header = http.CanonicalHeaderKey(p.header)
	return p
}

// source checks cfg's Source and Header against each other and the trust
// settings, sets p's source and mode, and returns the header to read.
func (cfg ClientIPConfig) source(p *clientIPPlan, fail func(format string, args ...any)) string {
	header := cfg.Header
	switch cfg.Source {
	case SourceXForwardedFor, SourceForwarded:
		format := "X-Forwarded-For"
		if cfg.Source == SourceForwarded {
			p.src, format = clientip.Forwarded, "Forwarded"
		}
		if header == "" {
			header = format
		}
		switch h := http.CanonicalHeaderKey(header); h {
		case "Forwarded", "X-Forwarded-For", "X-Real-Ip", "Cf-Connecting-Ip", "True-Client-Ip":
			if h != format {
				fail("header %s does not have the format of %s", header, format)
			}
		}
		p.mode = modeRightmostUntrusted
		if p.hops > 0 {
			p.mode = modeHops
		} else if p.trusted.Len() == 0 {
			fail("no trusted proxies; list the addresses of your proxies, or use ByIP when clients connect directly")
		}
	case SourceHeader:
		if header == "" {
			fail("SourceHeader needs a Header name, such as X-Real-IP")
		}
		switch http.CanonicalHeaderKey(header) {
		case "X-Forwarded-For", "Forwarded":
			fail("%s is a list; use SourceXForwardedFor or SourceForwarded", header)
		}
		if p.hops != 0 {
			fail("Hops does not apply to a single-address header")
		}
		if p.trusted.Len() == 0 {
			fail("no trusted proxies; %s is only believed from the proxy that sets it", header)
		}
		p.mode = modeSingle
	default:
		fail("unknown ClientIPSource %d", cfg.Source)
	}
	return header
}
