package clientip

import (
	"net/netip"
	"strings"
	"testing"
)

// The fuzz targets take a header as one string, lines separated by "\n",
// and check, for any input:
//
//   - no panic, and a successful result is a normalised, untrusted address
//     whose Host (when Canon) is its canonical text;
//   - agreement with a simple reference implementation that splits the
//     header left to right (allocating freely) wherever the reference can
//     parse the header;
//   - the anti-spoofing property: whatever a client sends, once a proxy
//     appends the client's real address (and trusted proxies append theirs),
//     that address is the result.

var fuzzTrusted = func() *Set {
	s, err := ParseSet([]string{"10.0.0.0/8", "2001:db8:ffff::/48", "192.0.2.1"})
	if err != nil {
		panic(err)
	}
	return &s
}()

func fuzzLines(data string) []string {
	if data == "" {
		return nil
	}
	return strings.Split(data, "\n")
}

func checkResult(t *testing.T, what string, n Node, r Reason) {
	t.Helper()
	if r != OK {
		if n != (Node{}) {
			t.Fatalf("%s: failure %v with node %+v", what, r, n)
		}
		return
	}
	a := n.Addr
	if !a.IsValid() || a.Zone() != "" || a.Is4In6() || a.IsUnspecified() {
		t.Fatalf("%s: unnormalised address %v", what, a)
	}
	if n.Canon && n.Host != a.String() {
		t.Fatalf("%s: canonical host %q != %v", what, n.Host, a)
	}
	if b, _, ok := ParseIP(n.Host); !ok || b != a {
		t.Fatalf("%s: host %q does not parse back to %v", what, n.Host, a)
	}
	for _, bits := range [][2]int{{32, 64}, {24, 128}, {1, 1}} {
		k := Key(n, bits[0], bits[1], nil)
		if k == "" {
			t.Fatalf("%s: empty key", what)
		}
	}
	// An address that embeds an IPv4 client has that client's key, and no
	// other IPv6 address has an IPv4 key.
	want := netip.PrefixFrom(a, 64).Masked().String()
	if a.Is4() {
		want = a.String()
	} else if v4, ok := fuzzNAT.Embedded(a); ok {
		want = v4.String()
	}
	if k := Key(n, 32, 64, fuzzNAT); k != want {
		t.Fatalf("%s: key %q of %v, want %q", what, k, a, want)
	}
}

var fuzzNAT = func() *Translators {
	t, err := ParseTranslators([]string{"2001:db8:64::/96", "64:ff9b:1::/48"})
	if err != nil {
		panic(err)
	}
	return &t
}()

// refWalk is the reference: every member split out up front. Empty members
// (only optional whitespace) are skipped but count against max.
func refWalk(members []string, parse func(string) (Node, Reason), trusted *Set, max int) (Node, Reason) {
	seen := false
	for i := 0; i < len(members); i++ {
		if i == max {
			return Node{}, TooMany
		}
		m := members[len(members)-1-i]
		if strings.Trim(m, " \t") == "" {
			continue
		}
		seen = true
		n, r := parse(m)
		if r != OK {
			return Node{}, r
		}
		if !trusted.Contains(n.Addr) {
			return n, OK
		}
	}
	if !seen {
		return Node{}, Missing
	}
	return Node{}, AllTrusted
}

func FuzzXForwardedFor(f *testing.F) {
	for _, s := range []string{
		"203.0.113.7",
		"1.1.1.1, 203.0.113.7, 10.0.0.1",
		"1.1.1.1\n203.0.113.7, 10.0.0.1",
		"[2001:db8::1]:80, ::ffff:10.0.0.1, fe80::1%eth0",
		"unknown, _hidden, 01.2.3.4, 0x7f.0.0.1, 1.2.3, 256.0.0.1",
		"10.0.0.1,,10.0.0.2",
		"198.51.100.9, , 10.0.0.3",
		" ,\n, ,\t",
		"1.2.3.4\x00, 1.2.3.4\xff",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data string) {
		lines := fuzzLines(data)
		n, r := RightmostUntrusted(XForwardedFor, lines, fuzzTrusted, 32)
		checkResult(t, "RightmostUntrusted", n, r)
		if r == OK && fuzzTrusted.Contains(n.Addr) {
			t.Fatalf("trusted address %v returned as client", n.Addr)
		}

		// Reference: split everything.
		var members []string
		if lines != nil {
			members = strings.Split(strings.Join(lines, ","), ",")
		}
		rn, rr := refWalk(members, func(m string) (Node, Reason) { return parseXFFMember(strings.Trim(m, " \t")) }, fuzzTrusted, 32)
		if rr != r || rn != n {
			t.Fatalf("RightmostUntrusted(%q) = %+v, %v; reference %+v, %v", lines, n, r, rn, rr)
		}

		hn, hr := NthFromRight(XForwardedFor, lines, 2, 32)
		checkResult(t, "NthFromRight", hn, hr)

		// Anti-spoofing: a proxy appends the client's real address, then two
		// trusted proxies append theirs, on the same line or a new one.
		for _, spoofed := range [][]string{
			appendToLast(lines, ", 198.51.100.9, 10.0.0.1", "198.51.100.9, 10.0.0.1"),
			append(append([]string(nil), lines...), "198.51.100.9", "10.0.0.1"),
		} {
			n, r := RightmostUntrusted(XForwardedFor, spoofed, fuzzTrusted, 32)
			if r != OK || n.Addr != netip.MustParseAddr("198.51.100.9") {
				t.Fatalf("spoofed by %q: got %+v, %v", data, n, r)
			}
			n, r = NthFromRight(XForwardedFor, spoofed, 2, 32)
			if r != OK || n.Addr != netip.MustParseAddr("198.51.100.9") {
				t.Fatalf("hops spoofed by %q: got %+v, %v", data, n, r)
			}
		}
	})
}

// appendToLast appends suffix to the last line, or returns a single line
// alone when there are none.
func appendToLast(lines []string, suffix, alone string) []string {
	if len(lines) == 0 {
		return []string{alone}
	}
	out := append([]string(nil), lines...)
	out[len(out)-1] += suffix
	return out
}

// refElements splits a Forwarded line left to right, honouring quoted
// strings; ok is false if a quoted string is unterminated.
func refElements(line string) (elems []string, ok bool) {
	start, inQuote := 0, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case inQuote && c == '\\':
			i++
			if i == len(line) {
				return nil, false
			}
		case c == '"':
			inQuote = !inQuote
		case c == ',' && !inQuote:
			elems = append(elems, line[start:i])
			start = i + 1
		}
	}
	if inQuote {
		return nil, false
	}
	return append(elems, line[start:]), true
}

func refForwardedMember(elem string) (Node, Reason) {
	v, r := forValue(elem)
	if r != OK {
		return Node{}, r
	}
	return parseForNode(v)
}

func FuzzForwarded(f *testing.F) {
	for _, s := range []string{
		`for=203.0.113.7`,
		`for=192.0.2.43, for=198.51.100.17;proto=https;by=10.0.0.1`,
		`For="[2001:db8:cafe::17]:4711"`,
		`for="_gazonk", for=unknown`,
		"for=1.1.1.1\nfor=203.0.113.7, for=10.0.0.1",
		`for=203.0.113.7;host="a, for=1.1.1.1\"", for="[::ffff:10.0.0.1]"`,
		`for="1.1.1.1, for=203.0.113.7`,
		`for=\", for=203.0.113.7`,
		`proto=https, ;;, for=`,
		`for=198.51.100.9, , for=10.0.0.3`,
		"for=198.51.100.9,\n ,",
		"for=\"1.2.3.4\x00\", for=\"\xff\"",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data string) {
		lines := fuzzLines(data)
		n, r := RightmostUntrusted(Forwarded, lines, fuzzTrusted, 32)
		checkResult(t, "RightmostUntrusted", n, r)
		if r == OK && fuzzTrusted.Contains(n.Addr) {
			t.Fatalf("trusted address %v returned as client", n.Addr)
		}

		// Reference: where every line splits cleanly left to right, the
		// right-to-left walk must agree with walking the split elements.
		var elems []string
		clean := true
		for _, l := range lines {
			e, ok := refElements(l)
			if !ok {
				clean = false
				break
			}
			elems = append(elems, e...)
		}
		if clean {
			rn, rr := refWalk(elems, refForwardedMember, fuzzTrusted, 32)
			if (rr == OK) != (r == OK) || rn != n {
				t.Fatalf("RightmostUntrusted(%q) = %+v, %v; reference %+v, %v", lines, n, r, rn, rr)
			}
		}

		hn, hr := NthFromRight(Forwarded, lines, 2, 32)
		checkResult(t, "NthFromRight", hn, hr)

		// Anti-spoofing, as for X-Forwarded-For.
		want := netip.MustParseAddr("2001:db8::9")
		for _, spoofed := range [][]string{
			appendToLast(lines, `, for="[2001:db8::9]:443";proto=https, for=10.0.0.1;by="[2001:db8:ffff::1]"`,
				`for="[2001:db8::9]:443";proto=https, for=10.0.0.1;by="[2001:db8:ffff::1]"`),
			append(append([]string(nil), lines...), `for="[2001:db8::9]:443";host="x\"y, z"`, `for=10.0.0.1`),
		} {
			n, r := RightmostUntrusted(Forwarded, spoofed, fuzzTrusted, 32)
			if r != OK || n.Addr != want {
				t.Fatalf("spoofed by %q: got %+v, %v", data, n, r)
			}
			n, r = NthFromRight(Forwarded, spoofed, 2, 32)
			if r != OK || n.Addr != want {
				t.Fatalf("hops spoofed by %q: got %+v, %v", data, n, r)
			}
		}
	})
}

func FuzzParseHostPort(f *testing.F) {
	for _, s := range []string{
		"192.0.2.1:80", "[2001:db8::1%eth0]:443", "::ffff:1.2.3.4", "01.2.3.4", "1.2.3", "@",
		"64:ff9b::1.2.3.4", "[64:ff9b::102:304]:443", "64:ff9b:1:0:102:304::", "2001:db8:64::1.2.3.4", "::ffff:102:304",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		// ParseIP accepts exactly the IPv4 addresses netip accepts (its
		// fast path must not be looser or stricter), except 0.0.0.0.
		if a, err := netip.ParseAddr(s); err == nil && a.Is4() {
			b, canon, ok := ParseIP(s)
			if ok != !a.IsUnspecified() || (ok && (b != a || !canon)) {
				t.Fatalf("ParseIP(%q) = %v, %v, %v; netip says %v", s, b, canon, ok, a)
			}
		} else if _, _, ok := ParseIP(s); ok && err != nil && !strings.Contains(s, "%") {
			t.Fatalf("ParseIP(%q) accepted what netip rejects: %v", s, err)
		}
		host, addr, canon, ok := ParseHostPort(s)
		if !ok {
			return
		}
		checkResult(t, "ParseHostPort", Node{Host: host, Addr: addr, Canon: canon}, OK)
		if !strings.Contains(s, host) {
			t.Fatalf("host %q not in %q", host, s)
		}
		// Whatever we accept, netip accepts too (after our normalisation).
		if b, err := netip.ParseAddr(host); err != nil || b.Unmap().WithZone("") != addr {
			t.Fatalf("ParseHostPort(%q) = %v, netip says %v, %v", s, addr, b, err)
		}
	})
}
