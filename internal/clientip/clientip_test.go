package clientip

import (
	"net/netip"
	"strings"
	"testing"
)

func mustSet(t testing.TB, entries ...string) *Set {
	t.Helper()
	s, err := ParseSet(entries)
	if err != nil {
		t.Fatal(err)
	}
	return &s
}

func TestParseIP(t *testing.T) {
	tests := []struct {
		in    string
		want  string // "" = rejected
		canon bool
	}{
		{"192.0.2.1", "192.0.2.1", true},
		{"255.255.255.255", "255.255.255.255", true},
		{"2001:db8::1", "2001:db8::1", false},
		{"2001:DB8::1", "2001:db8::1", false},
		{"2001:0db8:0000::1", "2001:db8::1", false},
		{"::1", "::1", false},
		{"::ffff:192.0.2.1", "192.0.2.1", false},          // IPv4-mapped: unmapped
		{"::FFFF:192.0.2.1", "192.0.2.1", false},          // ditto, upper case
		{"::ffff:c000:201", "192.0.2.1", false},           // mapped, hex form
		{"fe80::1%eth0", "fe80::1", false},                // zone dropped
		{"fe80::1%12", "fe80::1", false},                  // numeric zone
		{"::ffff:192.0.2.1%eth0", "192.0.2.1", false},     // both
		{"::1.2.3.4", "::102:304", false},                 // IPv4-compatible is not mapped
		{"", "", false},                                   // empty
		{"0.0.0.0", "", false},                            // unspecified
		{"::", "", false},                                 // unspecified
		{"::ffff:0.0.0.0", "", false},                     // unspecified once unmapped
		{"1.2.3", "", false},                              // short form
		{"1.2", "", false},                                // short form
		{"16909060", "", false},                           // integer form
		{"01.2.3.4", "", false},                           // leading zero
		{"1.2.3.04", "", false},                           // leading zero
		{"010.0.0.1", "", false},                          // octal-looking
		{"0x7f.0.0.1", "", false},                         // hex octet
		{"0x7f000001", "", false},                         // hex integer
		{"256.1.1.1", "", false},                          // out of range
		{"1.2.3.300", "", false},                          // out of range
		{"1.2.3.-1", "", false},                           // negative
		{"1.2.3.4.5", "", false},                          // too long
		{"1.2.3.4 ", "", false},                           // whitespace
		{" 1.2.3.4", "", false},                           // whitespace
		{"1.2.3.4\x00", "", false},                        // NUL
		{"1.2.3.4\x00.evil", "", false},                   // NUL
		{"1.2.3.\xc4\xb0", "", false},                     // high bytes
		{"１.2.3.4", "", false},                            // fullwidth digit
		{"1.2.3.4%eth0", "", false},                       // zone on IPv4
		{"fe80::1%", "", false},                           // empty zone
		{"fe80::1%eth0%eth1", "", false},                  // zone with %
		{"fe80::1%eth 0", "", false},                      // zone with space
		{"fe80::1%" + strings.Repeat("a", 33), "", false}, // overlong zone
		{"[2001:db8::1]", "", false},                      // brackets not allowed here
		{"2001:db8::1:80:80:80:80:80", "", false},         // too many groups
		{"2001:db8:::1", "", false},                       // :::
		{"12345::1", "", false},                           // group too long
		{"::ffff:01.2.3.4", "", false},                    // mapped with leading zero
		{"unknown", "", false},
		{"localhost", "", false},
		{strings.Repeat("1", 100), "", false},
	}
	for _, tt := range tests {
		addr, canon, ok := ParseIP(tt.in)
		if tt.want == "" {
			if ok {
				t.Errorf("ParseIP(%q) = %v, want rejected", tt.in, addr)
			}
			continue
		}
		if !ok || addr.String() != tt.want || canon != tt.canon {
			t.Errorf("ParseIP(%q) = %v, canon %v, ok %v; want %s, canon %v", tt.in, addr, canon, ok, tt.want, tt.canon)
		}
		if addr.Zone() != "" || addr.Is4In6() {
			t.Errorf("ParseIP(%q) = %v not normalised", tt.in, addr)
		}
	}
}

func TestParseHostPort(t *testing.T) {
	tests := []struct {
		in, host, addr string // addr "" = rejected
	}{
		{"192.0.2.1", "192.0.2.1", "192.0.2.1"},
		{"192.0.2.1:1234", "192.0.2.1", "192.0.2.1"},
		{"192.0.2.1:0", "192.0.2.1", "192.0.2.1"},
		{"192.0.2.1:65535", "192.0.2.1", "192.0.2.1"},
		{"2001:db8::1", "2001:db8::1", "2001:db8::1"},
		{"[2001:db8::1]", "2001:db8::1", "2001:db8::1"},
		{"[2001:db8::1]:443", "2001:db8::1", "2001:db8::1"},
		{"[fe80::1%eth0]:443", "fe80::1", "fe80::1"},
		{"[::ffff:192.0.2.1]:443", "::ffff:192.0.2.1", "192.0.2.1"},
		{"192.0.2.1:65536", "", ""},
		{"192.0.2.1:123456", "", ""},
		{"192.0.2.1:", "", ""},
		{"192.0.2.1:http", "", ""},
		{"192.0.2.1:-1", "", ""},
		{"[192.0.2.1]:80", "", ""},
		{"[2001:db8::1]80", "", ""},
		{"[2001:db8::1]:", "", ""},
		{"[2001:db8::1", "", ""},
		{"2001:db8::1]", "", ""},
		{"example.com:80", "", ""},
		{"1.2.3:80", "", ""},
		{"01.2.3.4:80", "", ""},
		{"@", "", ""},
		{"", "", ""},
		{"pipe", "", ""},
	}
	for _, tt := range tests {
		host, addr, _, ok := ParseHostPort(tt.in)
		if tt.addr == "" {
			if ok {
				t.Errorf("ParseHostPort(%q) = %q %v, want rejected", tt.in, host, addr)
			}
			continue
		}
		if !ok || host != tt.host || addr.String() != tt.addr {
			t.Errorf("ParseHostPort(%q) = %q %v %v, want %q %s", tt.in, host, addr, ok, tt.host, tt.addr)
		}
	}
}

func TestParseSet(t *testing.T) {
	s := mustSet(t, "10.0.0.0/8", "192.0.2.10", "2001:db8::/32", "::1", "::ffff:172.16.0.0/108")
	for _, a := range []string{"10.1.2.3", "192.0.2.10", "2001:db8:1::5", "::1", "172.16.9.9"} {
		if !s.Contains(netip.MustParseAddr(a)) {
			t.Errorf("%s not trusted", a)
		}
	}
	for _, a := range []string{"11.0.0.1", "192.0.2.11", "2001:db9::1", "::2", "172.32.0.1"} {
		if s.Contains(netip.MustParseAddr(a)) {
			t.Errorf("%s trusted", a)
		}
	}
	for _, bad := range []string{"", " ", "10.0.0.0/33", "10.0.0.1/8", "0.0.0.0/0", "::/0", "fe80::1%eth0",
		"example.com", "10.0.0", "010.0.0.1", "::ffff:0:0/95", "10.0.0.0/8 ", "10.0.0.0/-1"} {
		if _, err := ParseSet([]string{bad}); err == nil {
			t.Errorf("ParseSet(%q) accepted", bad)
		}
	}
}

type walkCase struct {
	name  string
	lines []string
	want  string // the key at /32 and /128; "" = fail closed
	why   Reason
}

func runWalk(t *testing.T, src Source, trusted *Set, tests []walkCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, r := RightmostUntrusted(src, tt.lines, trusted, 32)
			got := ""
			if r == OK {
				got = Key(n, 32, 128, nil)
			}
			if got != tt.want || (tt.want == "" && r != tt.why) {
				t.Errorf("RightmostUntrusted(%q) = %q, %v; want %q, %v", tt.lines, got, r, tt.want, tt.why)
			}
		})
	}
}

// hostile returns a header of n members of the form member, ~10 bytes each.
func hostile(n int, member string) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(member)
	}
	return b.String()
}

func TestRightmostUntrustedXFF(t *testing.T) {
	trusted := mustSet(t, "10.0.0.0/8", "2001:db8:ffff::/48")
	big := hostile(10000, "10.0.0.1") // ~100 KB of trusted members
	runWalk(t, XForwardedFor, trusted, []walkCase{
		{"single", []string{"203.0.113.7"}, "203.0.113.7", OK},
		{"port", []string{"203.0.113.7:4711"}, "203.0.113.7", OK},
		{"ipv6", []string{"2001:db8::7"}, "2001:db8::7", OK},
		{"ipv6 bracket port", []string{"[2001:db8::7]:4711"}, "2001:db8::7", OK},
		{"skip trusted", []string{"203.0.113.7, 10.0.0.2, 10.0.0.1"}, "203.0.113.7", OK},
		{"whitespace", []string{" 203.0.113.7 ,\t10.0.0.1\t"}, "203.0.113.7", OK},
		{"no whitespace", []string{"203.0.113.7,10.0.0.1"}, "203.0.113.7", OK},
		// Spoofing: everything left of the first untrusted member is the
		// client's and never read, valid or not.
		{"spoofed leftmost", []string{"1.1.1.1, 203.0.113.7"}, "203.0.113.7", OK},
		{"spoofed trusted leftmost", []string{"10.9.9.9, 203.0.113.7, 10.0.0.1"}, "203.0.113.7", OK},
		{"garbage left of client", []string{"garbage, unknown, 01.2.3.4, \x00, 203.0.113.7"}, "203.0.113.7", OK},
		{"prepended many", []string{hostile(10000, "1.2.3.4") + ", 203.0.113.7"}, "203.0.113.7", OK},
		// Multiple lines are one list, in order.
		{"two lines", []string{"1.1.1.1, 203.0.113.7", "10.0.0.1"}, "203.0.113.7", OK},
		{"two lines client in last", []string{"203.0.113.7", "198.51.100.1"}, "198.51.100.1", OK},
		{"three lines", []string{"203.0.113.7", "10.0.0.3", "10.0.0.2, 10.0.0.1"}, "203.0.113.7", OK},
		{"empty line ignored", []string{"203.0.113.7", "", "10.0.0.1"}, "203.0.113.7", OK},
		// Normalisation before the trust check.
		{"mapped trusted", []string{"203.0.113.7, ::ffff:10.0.0.1"}, "203.0.113.7", OK},
		{"mapped client", []string{"::ffff:203.0.113.7, 10.0.0.1"}, "203.0.113.7", OK},
		{"zoned trusted", []string{"203.0.113.7, [2001:db8:ffff::1%eth0]:80"}, "203.0.113.7", OK},
		{"zoned client", []string{"fe80::9%eth0, 10.0.0.1"}, "fe80::9", OK},
		// Fail closed on the first bad member examined.
		{"unknown", []string{"203.0.113.7, unknown, 10.0.0.1"}, "", Malformed},
		{"obfuscated", []string{"203.0.113.7, _hidden, 10.0.0.1"}, "", Malformed},
		{"hostname", []string{"203.0.113.7, proxy.internal"}, "", Malformed},
		{"empty member ignored", []string{"203.0.113.7,,10.0.0.1"}, "203.0.113.7", OK},
		{"empty members ignored", []string{"198.51.100.9, , 10.0.0.3"}, "198.51.100.9", OK},
		{"trailing comma ignored", []string{"203.0.113.7,"}, "203.0.113.7", OK},
		{"leading comma ignored", []string{", 203.0.113.7"}, "203.0.113.7", OK},
		{"empty header", []string{""}, "", Missing},
		{"only empty members", []string{" , ,\t", ""}, "", Missing},
		{"empty members and trusted", []string{", 10.0.0.2, ,10.0.0.1"}, "", AllTrusted},
		{"bad member behind an empty one", []string{"203.0.113.7, x, , 10.0.0.1"}, "", Malformed},
		{"leading zeros", []string{"203.0.113.07"}, "", Malformed},
		{"hex", []string{"0xcb.0.113.7"}, "", Malformed},
		{"out of range", []string{"203.0.113.256"}, "", Malformed},
		{"short", []string{"203.0.113"}, "", Malformed},
		{"integer", []string{"3405803783"}, "", Malformed},
		{"NUL", []string{"203.0.113.7\x00"}, "", Malformed},
		{"NUL behind trusted", []string{"203.0.113.7\x00, 10.0.0.1"}, "", Malformed},
		{"high bytes", []string{"203.0.113.7\xff"}, "", Malformed},
		{"unicode", []string{"２０３.0.113.7"}, "", Malformed},
		{"quoted", []string{`"203.0.113.7"`}, "", Malformed},
		{"semicolon", []string{"203.0.113.7;for=1.1.1.1"}, "", Malformed},
		{"space inside", []string{"203.0.113.7 10.0.0.1"}, "", Malformed},
		{"unspecified", []string{"0.0.0.0"}, "", Malformed},
		// Nothing left to blame.
		{"missing", nil, "", Missing},
		{"all trusted", []string{"10.0.0.2, 10.0.0.1"}, "", AllTrusted},
		{"all trusted over lines", []string{"10.0.0.2", "10.0.0.1"}, "", AllTrusted},
		{"exactly cap trusted", []string{hostile(32, "10.0.0.1")}, "", AllTrusted},
		{"cap exceeded", []string{"203.0.113.7, " + hostile(32, "10.0.0.1")}, "", TooMany},
		{"hostile trusted 100KB", []string{big}, "", TooMany},
		{"hostile lines", strings.Split(hostile(10000, "10.0.0.1"), ", "), "", TooMany},
	})
}

func TestRightmostUntrustedForwarded(t *testing.T) {
	trusted := mustSet(t, "10.0.0.0/8", "2001:db8:ffff::/48")
	runWalk(t, Forwarded, trusted, []walkCase{
		{"rfc example 1", []string{`for="_gazonk"`}, "", Obfuscated},
		{"rfc example 2", []string{`For="[2001:db8:cafe::17]:4711"`}, "2001:db8:cafe::17", OK},
		{"rfc example 3", []string{`for=192.0.2.60;proto=http;by=203.0.113.43`}, "192.0.2.60", OK},
		{"rfc example 4", []string{`for=192.0.2.43, for=198.51.100.17`}, "198.51.100.17", OK},
		{"quoted ipv4", []string{`for="192.0.2.60"`}, "192.0.2.60", OK},
		{"quoted ipv4 port", []string{`for="192.0.2.60:8080"`}, "192.0.2.60", OK},
		{"obfuscated port", []string{`for="192.0.2.60:_abc"`}, "192.0.2.60", OK},
		{"quoted ipv6 no port", []string{`for="[2001:db8::7]"`}, "2001:db8::7", OK},
		{"name case", []string{`FOR=192.0.2.60;PROTO=https`}, "192.0.2.60", OK},
		{"for not first", []string{`proto=https;by=10.0.0.1;for=192.0.2.60`}, "192.0.2.60", OK},
		{"spaces around pairs", []string{`for=192.0.2.60 ; proto=https`}, "192.0.2.60", OK},
		{"empty pairs", []string{`;for=192.0.2.60;;`}, "192.0.2.60", OK},
		{"extension param", []string{`for=192.0.2.60;secret="a,b;c=\"d\""`}, "192.0.2.60", OK},
		{"quoted comma in host", []string{`for=203.0.113.7;host="a, for=1.1.1.1", for=10.0.0.1`}, "203.0.113.7", OK},
		{"escaped quote in host", []string{`for=203.0.113.7;host="a\",for=1.1.1.1", for=10.0.0.1`}, "203.0.113.7", OK},
		{"escaped backslash", []string{`for=203.0.113.7;host="a\\", for=10.0.0.1`}, "203.0.113.7", OK},
		{"skip trusted", []string{`for=203.0.113.7, for=10.0.0.2;proto=https, for="[2001:db8:ffff::1]:80"`}, "203.0.113.7", OK},
		{"mapped trusted", []string{`for=203.0.113.7, for="[::ffff:10.0.0.1]"`}, "203.0.113.7", OK},
		{"zoned trusted", []string{`for=203.0.113.7, for="[2001:db8:ffff::1%eth0]"`}, "203.0.113.7", OK},
		{"mapped client", []string{`for="[::ffff:203.0.113.7]:80"`}, "203.0.113.7", OK},
		{"two lines", []string{`for=1.1.1.1, for=203.0.113.7`, `for=10.0.0.1`}, "203.0.113.7", OK},
		// Spoofing: the client's part is never read, whatever its syntax.
		{"spoofed leftmost", []string{`for=1.1.1.1, for=203.0.113.7`}, "203.0.113.7", OK},
		{"unbalanced quote left", []string{`for="1.1.1.1, for=203.0.113.7`}, "203.0.113.7", OK},
		{"stray backslash left", []string{`for=\", for=203.0.113.7`}, "203.0.113.7", OK},
		{"garbage left", []string{"\x00\xff;;==,,\"\", for=203.0.113.7"}, "203.0.113.7", OK},
		{"prepended many", []string{hostile(10000, "for=1.2.3.4") + ", for=203.0.113.7"}, "203.0.113.7", OK},
		// Fail closed.
		{"unknown", []string{`for=203.0.113.7, for=unknown, for=10.0.0.1`}, "", Unknown},
		{"unknown upper", []string{`for=UNKNOWN`}, "", Unknown},
		{"obfuscated", []string{`for=_hidden, for=10.0.0.1`}, "", Obfuscated},
		{"bad obfuscated", []string{`for="_hid den"`}, "", Malformed},
		{"no for", []string{`for=203.0.113.7, proto=https`}, "", NoFor},
		{"empty element ignored", []string{`for=203.0.113.7, , for=10.0.0.1`}, "203.0.113.7", OK},
		{"empty elements ignored", []string{`,for=203.0.113.7,,`, ``, `for=10.0.0.1, `}, "203.0.113.7", OK},
		{"only empty elements", []string{` , `}, "", Missing},
		{"element of empty pairs", []string{`for=203.0.113.7, ;, for=10.0.0.1`}, "", NoFor},
		{"trailing comma ignored", []string{`for=203.0.113.7,`}, "203.0.113.7", OK},
		{"duplicate for", []string{`for=203.0.113.7;for=10.0.0.5`}, "", Malformed},
		{"duplicate proto", []string{`for=203.0.113.7;proto=http;proto=https`}, "", Malformed},
		{"unquoted ipv6", []string{`for=[2001:db8::7]`}, "", Malformed},
		{"unquoted port", []string{`for=192.0.2.60:80`}, "", Malformed},
		{"ipv6 without brackets", []string{`for="2001:db8::7"`}, "", Malformed},
		{"ipv4 in brackets", []string{`for="[192.0.2.60]"`}, "", Malformed},
		{"bad port", []string{`for="[2001:db8::7]:99999"`}, "", Malformed},
		{"empty port", []string{`for="[2001:db8::7]:"`}, "", Malformed},
		{"junk after bracket", []string{`for="[2001:db8::7]x"`}, "", Malformed},
		{"unterminated quote", []string{`for="192.0.2.60`}, "", Malformed},
		{"unterminated quote behind trusted", []string{`for="192.0.2.60, for=10.0.0.1`}, "", Malformed},
		{"escape in for", []string{`for="192.0.2.\60"`}, "", Malformed},
		{"empty for", []string{`for=""`}, "", Malformed},
		{"missing value", []string{`for=`}, "", Malformed},
		{"missing equals", []string{`for`}, "", Malformed},
		{"space before equals", []string{`for =192.0.2.60`}, "", Malformed},
		{"space after equals", []string{`for= 192.0.2.60`}, "", Malformed},
		{"junk after value", []string{`for=192.0.2.60 x`}, "", Malformed},
		{"junk after quoted value", []string{`for="192.0.2.60"x`}, "", Malformed},
		{"leading zeros", []string{`for=192.0.2.060`}, "", Malformed},
		{"hex", []string{`for=0xc0.0.2.60`}, "", Malformed},
		{"out of range", []string{`for=192.0.2.600`}, "", Malformed},
		{"short", []string{`for=192.0.2`}, "", Malformed},
		{"hostname", []string{`for=proxy.example`}, "", Malformed},
		{"NUL", []string{"for=192.0.2.60\x00"}, "", Malformed},
		{"NUL quoted", []string{"for=\"192.0.2.60\x00\""}, "", Malformed},
		{"high bytes", []string{"for=\"192.0.2.60\xff\""}, "", Malformed},
		{"high byte name", []string{"f\xffr=192.0.2.60"}, "", Malformed},
		{"CTL in quoted", []string{"for=1.2.3.4;host=\"a\x01\""}, "", Malformed},
		{"escaped quote outside", []string{`for=1.2.3.4;x=a\"b"`}, "", Malformed},
		{"missing", nil, "", Missing},
		{"all trusted", []string{`for=10.0.0.2, for=10.0.0.1`}, "", AllTrusted},
		{"cap", []string{`for=203.0.113.7, ` + hostile(32, "for=10.0.0.1")}, "", TooMany},
		{"hostile trusted 100KB", []string{hostile(10000, "for=10.0.0.1")}, "", TooMany},
		{"hostile quotes", []string{strings.Repeat(`"\"`, 50000) + `, for=10.0.0.1`}, "", Malformed},
	})
}

func TestNthFromRight(t *testing.T) {
	tests := []struct {
		src   Source
		lines []string
		n     int
		want  string
		why   Reason
	}{
		{XForwardedFor, []string{"1.1.1.1, 203.0.113.7"}, 1, "203.0.113.7", OK},
		{XForwardedFor, []string{"1.1.1.1, 203.0.113.7, 10.0.0.1"}, 2, "203.0.113.7", OK},
		{XForwardedFor, []string{"1.1.1.1, 203.0.113.7", "10.0.0.1"}, 2, "203.0.113.7", OK},
		{XForwardedFor, []string{"203.0.113.7"}, 2, "", TooFew},
		{XForwardedFor, nil, 1, "", Missing},
		{XForwardedFor, []string{"203.0.113.7, garbage"}, 2, "", Malformed},
		{XForwardedFor, []string{"garbage, 203.0.113.7"}, 1, "203.0.113.7", OK},
		{XForwardedFor, []string{"unknown, 203.0.113.7"}, 2, "", Malformed},
		{Forwarded, []string{`for=1.1.1.1, for="[2001:db8::7]:1", for=10.0.0.1`}, 2, "2001:db8::7", OK},
		{Forwarded, []string{`for=_x, for=10.0.0.1`}, 2, "", Obfuscated},
		{Forwarded, []string{`for=unknown`}, 1, "", Unknown},
		{Forwarded, []string{`proto=http`}, 1, "", NoFor},
		{XForwardedFor, []string{"1.1.1.1, 203.0.113.7, , 10.0.0.1,"}, 2, "203.0.113.7", OK},
		{XForwardedFor, []string{"203.0.113.7", "", " , "}, 1, "203.0.113.7", OK},
		{XForwardedFor, []string{" , "}, 1, "", Missing},
		{XForwardedFor, []string{"203.0.113.7, ,"}, 2, "", TooFew},
		{XForwardedFor, []string{"203.0.113.7" + strings.Repeat(",", 32)}, 1, "", TooMany},
		{XForwardedFor, []string{"203.0.113.7" + strings.Repeat(",", 31)}, 1, "203.0.113.7", OK},
		{Forwarded, []string{`for=203.0.113.7, , for=10.0.0.1`}, 2, "203.0.113.7", OK},
	}
	for _, tt := range tests {
		n, r := NthFromRight(tt.src, tt.lines, tt.n, 32)
		got := ""
		if r == OK {
			got = Key(n, 32, 128, nil)
		}
		if got != tt.want || r != tt.why {
			t.Errorf("NthFromRight(%v, %q, %d) = %q, %v; want %q, %v", tt.src, tt.lines, tt.n, got, r, tt.want, tt.why)
		}
	}
}

func TestSingle(t *testing.T) {
	tests := []struct {
		lines []string
		want  string
		why   Reason
	}{
		{[]string{"203.0.113.7"}, "203.0.113.7", OK},
		{[]string{" 203.0.113.7 "}, "203.0.113.7", OK},
		{[]string{"2001:db8::7"}, "2001:db8::7", OK},
		{[]string{"::ffff:203.0.113.7"}, "203.0.113.7", OK},
		{nil, "", Missing},
		{[]string{""}, "", Malformed},
		{[]string{"203.0.113.7", "1.1.1.1"}, "", Duplicate},
		{[]string{"1.1.1.1, 203.0.113.7"}, "", Malformed},
		{[]string{"unknown"}, "", Malformed},
		{[]string{"203.0.113.07"}, "", Malformed},
		{[]string{"203.0.113.7\x00"}, "", Malformed},
	}
	for _, tt := range tests {
		n, r := Single(tt.lines)
		got := ""
		if r == OK {
			got = Key(n, 32, 128, nil)
		}
		if got != tt.want || r != tt.why {
			t.Errorf("Single(%q) = %q, %v; want %q, %v", tt.lines, got, r, tt.want, tt.why)
		}
	}
}

func TestKey(t *testing.T) {
	tests := []struct {
		in     string
		v4, v6 int
		want   string
	}{
		{"192.0.2.1", 32, 64, "192.0.2.1"},
		{"192.0.2.1", 24, 64, "192.0.2.0/24"},
		{"::ffff:192.0.2.1", 32, 64, "192.0.2.1"},
		{"2001:db8:1:2:3:4:5:6", 32, 64, "2001:db8:1:2::/64"},
		{"2001:db8:1:2:3:4:5:6", 32, 128, "2001:db8:1:2:3:4:5:6"},
		{"2001:db8:1:2:3:4:5:6", 32, 48, "2001:db8:1::/48"},
		{"fe80::1%eth0", 32, 128, "fe80::1"},
	}
	for _, tt := range tests {
		a, canon, ok := ParseIP(tt.in)
		if !ok {
			t.Fatalf("ParseIP(%q) failed", tt.in)
		}
		if got := Key(Node{Host: tt.in, Addr: a, Canon: canon}, tt.v4, tt.v6, nil); got != tt.want {
			t.Errorf("Key(%q, %d, %d) = %q, want %q", tt.in, tt.v4, tt.v6, got, tt.want)
		}
	}
}

// TestKeyOfTranslatedAddressIsItsIPv4: behind a stateless translator
// (SIIT, NAT64, NAT46) every IPv4 client arrives as an address in one IPv6
// /96, so keying it by its /64 gave all of them one key. An address in the
// well-known prefix, in any notation, or in a network-specific prefix the
// operator names (each RFC 6052 length, with the RFC's own examples) is
// keyed as the IPv4 address it embeds, grouped by the IPv4 prefix length.
func TestKeyOfTranslatedAddressIsItsIPv4(t *testing.T) {
	nsp, err := ParseTranslators([]string{
		"2001:db8::/32", "2001:db9:100::/40", "2001:dba:122::/48",
		"2001:dbb:122:300::/56", "2001:dbc:122:344::/64", "2001:dbd:122:344::/96",
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		in   string
		nat  *Translators
		v4   int
		want string
	}{
		{"64:ff9b::192.0.2.33", nil, 32, "192.0.2.33"},
		{"64:ff9b::c000:221", nil, 32, "192.0.2.33"},
		{"64:FF9B:0:0:0:0:C000:221", nil, 32, "192.0.2.33"},
		{"64:ff9b::192.0.2.34", nil, 32, "192.0.2.34"},
		{"64:ff9b::192.0.2.33", nil, 24, "192.0.2.0/24"},
		{"64:ff9b::192.0.2.33%eth0", &nsp, 32, "192.0.2.33"},
		{"2001:db8:c000:221::", &nsp, 32, "192.0.2.33"},
		{"2001:db9:1c0:2:21::", &nsp, 32, "192.0.2.33"},
		{"2001:dba:122:c000:2:2100::", &nsp, 32, "192.0.2.33"},
		{"2001:dbb:122:3c0:0:221::", &nsp, 32, "192.0.2.33"},
		{"2001:dbc:122:344:c0:2:2100:0", &nsp, 32, "192.0.2.33"},
		{"2001:dbd:122:344::192.0.2.33", &nsp, 32, "192.0.2.33"},
		// Not translated: the local-use prefix unless named, a network
		// prefix nobody named, and addresses just outside the well-known one.
		{"64:ff9b:1::192.0.2.33", &nsp, 32, "64:ff9b:1::/64"},
		{"2001:dbd:122:344::192.0.2.33", nil, 32, "2001:dbd:122:344::/64"},
		{"64:ff9b:0:0:1::192.0.2.33", nil, 32, "64:ff9b::/64"},
		{"64:ff9a:ffff:ffff:ffff:ffff:ffff:ffff", nil, 32, "64:ff9a:ffff:ffff::/64"},
	}
	for _, tt := range tests {
		a, canon, ok := ParseIP(tt.in)
		if !ok {
			t.Fatalf("ParseIP(%q) failed", tt.in)
		}
		if got := Key(Node{Host: tt.in, Addr: a, Canon: canon}, tt.v4, 64, tt.nat); got != tt.want {
			t.Errorf("Key(%q, %d, 64) = %q, want %q", tt.in, tt.v4, got, tt.want)
		}
	}
}

// TestParseTranslatorsRejectsAmbiguousPrefixes: a translation prefix that
// is not one RFC 6052 defines, or that overlaps another, would embed a
// different IPv4 address than the translator did; each is refused with a
// message naming it.
func TestParseTranslatorsRejectsAmbiguousPrefixes(t *testing.T) {
	for _, entries := range [][]string{
		{"2001:db8::/33"},
		{"2001:db8::/128"},
		{"2001:db8::1/96"},
		{"10.0.0.0/8"},
		{"::ffff:0:0/96"},
		{"2001:db8::%eth0/96"},
		{"2001:db8::"},
		{""},
		{"64:ff9b::/32"},
		{"2001:db8::/32", "2001:db8:1::/48"},
		{"2001:db8::/96", "2001:db8::/96"},
		make([]string, MaxTranslators+1),
	} {
		if _, err := ParseTranslators(entries); err == nil {
			t.Errorf("ParseTranslators(%q) accepted", entries)
		}
	}
	if _, err := ParseTranslators([]string{"64:ff9b::/96", "64:ff9b:1::/96", "2001:db8::/32"}); err != nil {
		t.Errorf("valid prefixes refused: %v", err)
	}
}

func TestReasonString(t *testing.T) {
	for r := OK; r < NumReasons; r++ {
		if s := r.String(); s == "" || s == "invalid reason" {
			t.Errorf("Reason(%d) has no text", r)
		}
	}
	if NumReasons.String() != "invalid reason" {
		t.Error("out-of-range reason")
	}
}

// TestNoAllocs checks that parsing allocates nothing, even for hostile input.
func TestNoAllocs(t *testing.T) {
	trusted := mustSet(t, "10.0.0.0/8")
	xff := []string{hostile(10000, "10.0.0.1")}
	fwd := []string{hostile(10000, `for="[2001:db8::1]:80"`) + ", " + hostile(40, "for=10.0.0.1")}
	good := []string{"1.1.1.1, 203.0.113.7, 10.0.0.1"}
	for name, f := range map[string]func(){
		"xff hostile": func() { RightmostUntrusted(XForwardedFor, xff, trusted, 32) },
		"fwd hostile": func() { RightmostUntrusted(Forwarded, fwd, trusted, 32) },
		"xff good":    func() { RightmostUntrusted(XForwardedFor, good, trusted, 32) },
		"key v4": func() {
			n, _ := RightmostUntrusted(XForwardedFor, good, trusted, 32)
			_ = Key(n, 32, 64, nil)
		},
	} {
		if a := testing.AllocsPerRun(100, f); a != 0 {
			t.Errorf("%s: %v allocs, want 0", name, a)
		}
	}
}

func BenchmarkRightmostUntrusted(b *testing.B) {
	trusted := mustSet(b, "10.0.0.0/8", "2001:db8:ffff::/48")
	cases := []struct {
		name  string
		src   Source
		lines []string
	}{
		{"XFF/typical", XForwardedFor, []string{"203.0.113.7, 10.0.0.2, 10.0.0.1"}},
		{"XFF/hostile-100KB-trusted", XForwardedFor, []string{hostile(10000, "10.0.0.1")}},
		{"XFF/hostile-100KB-prepended", XForwardedFor, []string{hostile(10000, "1.2.3.4") + ", 203.0.113.7, 10.0.0.1"}},
		{"XFF/hostile-10000-lines", XForwardedFor, strings.Split(hostile(10000, "10.0.0.1"), ", ")},
		{"Forwarded/typical", Forwarded, []string{`for=203.0.113.7;proto=https, for="[2001:db8:ffff::1]:80"`}},
		{"Forwarded/hostile-100KB-trusted", Forwarded, []string{hostile(10000, "for=10.0.0.1")}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				RightmostUntrusted(c.src, c.lines, trusted, 32)
			}
		})
	}
}
