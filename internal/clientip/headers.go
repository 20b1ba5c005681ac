package clientip

import (
	"net/netip"
	"strings"
)

// Reason says why no client address could be determined. The zero value, OK,
// means one was.
type Reason uint8

// Reasons, each a distinct way to fail closed.
const (
	OK         Reason = iota
	Missing           // the header is absent from a trusted peer
	Malformed         // a member that had to be examined is not a valid address
	Unknown           // a member is "unknown" (RFC 7239)
	Obfuscated        // a member is an obfuscated identifier such as "_hidden" (RFC 7239)
	NoFor             // a Forwarded element has no for= parameter
	AllTrusted        // every member is a trusted proxy: there is no client address
	TooMany           // more members than the cap had to be examined
	TooFew            // fewer members than the configured hop count
	Duplicate         // a single-value header appears on more than one line
	BadPeer           // RemoteAddr is not an IP address (a Unix socket, a test)
	Empty             // an empty list element ("a, , b"): skipped, never an address
	NumReasons
)

var reasonText = [NumReasons]string{
	OK:         "ok",
	Missing:    "header missing from a trusted proxy",
	Malformed:  "malformed address",
	Unknown:    `"unknown" address`,
	Obfuscated: "obfuscated address",
	NoFor:      "element without for= parameter",
	AllTrusted: "every address is a trusted proxy",
	TooMany:    "too many addresses",
	TooFew:     "fewer addresses than trusted hops",
	Duplicate:  "header repeated",
	BadPeer:    "RemoteAddr is not an IP address",
	Empty:      "empty list element",
}

// String describes r in a few words, for error messages.
func (r Reason) String() string {
	if r < NumReasons {
		return reasonText[r]
	}
	return "invalid reason"
}

// Source is a header format that lists addresses, one per proxy hop.
type Source uint8

const (
	// XForwardedFor is the de facto X-Forwarded-For list: comma-separated
	// addresses, the rightmost appended by the nearest proxy.
	XForwardedFor Source = iota
	// Forwarded is RFC 7239: comma-separated elements of semicolon-separated
	// name=value pairs; the address is the for= parameter.
	Forwarded
)

// Node is an address found in a header or RemoteAddr.
type Node struct {
	// Host is the address text as found (a substring of the input, without
	// brackets, port or quotes). It is the canonical text of Addr when Canon.
	Host  string
	Addr  netip.Addr
	Canon bool
}

// Iter walks the members of a list header from right to left: the last
// header line first, and within each line from its end. Header lines are one
// list, as if joined with commas (RFC 9110, section 5.3). Iter never
// allocates and only reads the bytes of the members it returns.
type Iter struct {
	src   Source
	lines []string
	cur   string // the unread prefix of the current line
	has   bool   // whether cur is a line still being read
}

// NewIter returns an iterator over the members of lines, the values of every
// line of one header in the order received.
func NewIter(src Source, lines []string) Iter {
	return Iter{src: src, lines: lines}
}

// Next returns the next member from the right, parsed and normalised. done
// reports that the list is exhausted. An empty list element (nothing but
// optional whitespace between commas, or an empty line) yields Empty: RFC
// 9110, section 5.6.1.2, has recipients ignore it, so the caller skips it
// (it is never an address) but counts it against its cap. Any other member
// that is not a valid address yields another Reason; the caller must stop
// there (fail closed) rather than skip it.
func (it *Iter) Next() (n Node, r Reason, done bool) {
	if !it.has {
		if len(it.lines) == 0 {
			return Node{}, OK, true
		}
		it.cur = it.lines[len(it.lines)-1]
		it.lines = it.lines[:len(it.lines)-1]
		it.has = true
	}
	var member string
	switch it.src {
	case Forwarded:
		var rest string
		var ok, last bool
		member, rest, last, ok = lastElement(it.cur)
		if !ok {
			it.has = false
			return Node{}, Malformed, false
		}
		it.cur, it.has = rest, !last
		if trimOWS(member) == "" {
			return Node{}, Empty, false
		}
		var fr Reason
		member, fr = forValue(member)
		if fr != OK {
			return Node{}, fr, false
		}
		n, r = parseForNode(member)
	default:
		if i := strings.LastIndexByte(it.cur, ','); i >= 0 {
			member, it.cur = it.cur[i+1:], it.cur[:i]
		} else {
			member, it.has = it.cur, false
		}
		member = trimOWS(member)
		if member == "" {
			return Node{}, Empty, false
		}
		n, r = parseXFFMember(member)
	}
	return n, r, false
}

// RightmostUntrusted returns the client address in lines: walking from the
// right, it skips empty list elements and members that are in trusted and
// returns the first member that is neither. It fails closed on the first
// member it cannot parse, if every member is trusted (AllTrusted), if there
// is no member at all (Missing: no header, or only empty elements), and if
// it examines max members, empty ones included, without finding an
// untrusted one (TooMany).
func RightmostUntrusted(src Source, lines []string, trusted *Set, max int) (Node, Reason) {
	it := NewIter(src, lines)
	examined, seen := 0, false // seen: a member that is not empty
	for {
		n, r, done := it.nextMember(&examined, max)
		switch {
		case done && !seen:
			return Node{}, Missing
		case done:
			return Node{}, AllTrusted
		case r != OK:
			return Node{}, r
		}
		seen = true
		if !trusted.Contains(n.Addr) {
			return n, OK
		}
	}
}

// NthFromRight returns the n-th member from the right (n >= 1) of lines,
// not counting empty list elements, after checking that the n-1 members to
// its right are valid addresses. It fails closed with TooFew when there are
// fewer than n members, Missing when there is none (no header, or only
// empty elements), TooMany when it examines max members, empty ones
// included, before the n-th, and on the first member it cannot parse.
func NthFromRight(src Source, lines []string, n, max int) (Node, Reason) {
	it := NewIter(src, lines)
	examined, found := 0, 0
	for {
		node, r, done := it.nextMember(&examined, max)
		switch {
		case done && found == 0:
			return Node{}, Missing
		case done:
			return Node{}, TooFew
		case r != OK:
			return Node{}, r
		}
		if found++; found == n {
			return node, OK
		}
	}
}

// nextMember returns the next member that is not empty, counting in
// *examined every member it reads, empty ones included. done reports the
// end of the list; once max members have been read (and the list goes on)
// it returns TooMany instead of reading another.
func (it *Iter) nextMember(examined *int, max int) (n Node, r Reason, done bool) {
	for {
		n, r, done = it.Next()
		switch {
		case done:
			return Node{}, OK, true
		case *examined == max:
			return Node{}, TooMany, false
		}
		*examined++
		if r != Empty {
			return n, r, false
		}
	}
}

// Single parses a header that holds exactly one address (X-Real-IP,
// CF-Connecting-IP, True-Client-IP). More than one line is Duplicate; a list
// or anything else that is not one address is Malformed.
func Single(lines []string) (Node, Reason) {
	switch len(lines) {
	case 0:
		return Node{}, Missing
	case 1:
		return parseXFFMember(trimOWS(lines[0]))
	default:
		return Node{}, Duplicate
	}
}

// parseXFFMember parses one X-Forwarded-For member (already trimmed of
// optional whitespace).
func parseXFFMember(m string) (Node, Reason) {
	host, addr, canon, ok := ParseHostPort(m)
	if !ok {
		return Node{}, Malformed
	}
	return Node{Host: host, Addr: addr, Canon: canon}, OK
}

// trimOWS removes optional whitespace (SP and HTAB) from both ends of s.
func trimOWS(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}
