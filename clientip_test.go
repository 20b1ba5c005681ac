package ratelimit_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicehq/ratelimit"
)

// kfReq builds a request from peer with the given header lines; each header
// is "Name: value" and may repeat.
func kfReq(peer string, headers ...string) *http.Request {
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = peer
	for _, h := range headers {
		name, value, found := strings.Cut(h, ":")
		if !found {
			panic("bad header " + h)
		}
		r.Header.Add(name, strings.TrimPrefix(value, " "))
	}
	return r
}

// kfPanics returns the panic message of f, or "" if it did not panic.
func kfPanics(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg, _ = r.(string)
			if msg == "" {
				msg = "non-string panic"
			}
		}
	}()
	f()
	return ""
}

type keyCase struct {
	name    string
	peer    string
	headers []string
	want    string // "" = an error wrapping ErrNoKey
}

func runKeyCases(t *testing.T, kf ratelimit.KeyFunc, tests []keyCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := kf(kfReq(tt.peer, tt.headers...))
			if tt.want == "" {
				if err == nil || !errors.Is(err, ratelimit.ErrNoKey) || got != "" {
					t.Fatalf("key = %q, %v; want an error wrapping ErrNoKey", got, err)
				}
				if !strings.HasPrefix(err.Error(), "ratelimit: ") {
					t.Errorf("error %q lacks the ratelimit: prefix", err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("key = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestByIP(t *testing.T) {
	runKeyCases(t, ratelimit.ByIP(), []keyCase{
		{"ipv4", "192.0.2.1:1234", nil, "192.0.2.1"},
		{"ipv4 no port", "192.0.2.1", nil, "192.0.2.1"},
		{"ipv6 grouped /64", "[2001:db8:1:2:3:4:5:6]:1234", nil, "2001:db8:1:2::/64"},
		{"ipv6 same /64", "[2001:db8:1:2:ffff::1]:1", nil, "2001:db8:1:2::/64"},
		{"ipv4-mapped", "[::ffff:192.0.2.1]:1234", nil, "192.0.2.1"},
		{"zone", "[fe80::1%eth0]:1234", nil, "fe80::/64"},
		{"loopback v6", "[::1]:80", nil, "::/64"},
		{"headers ignored", "192.0.2.1:1234", []string{"X-Forwarded-For: 1.1.1.1", "X-Real-IP: 1.1.1.1", "Forwarded: for=1.1.1.1"}, "192.0.2.1"},
		{"empty", "", nil, ""},
		{"unix socket", "@", nil, ""},
		{"hostname", "localhost:80", nil, ""},
		{"leading zero", "192.0.2.01:80", nil, ""},
		{"bad port", "192.0.2.1:x", nil, ""},
	})
	runKeyCases(t, ratelimit.ClientIPConfig{Source: ratelimit.SourcePeer, IPv4Prefix: 24, IPv6Prefix: 128}.KeyFunc(), []keyCase{
		{"ipv4 /24", "192.0.2.77:1", nil, "192.0.2.0/24"},
		{"ipv6 /128", "[2001:db8::1%eth0]:1", nil, "2001:db8::1"},
	})
	runKeyCases(t, ratelimit.ClientIPConfig{Source: ratelimit.SourcePeer, IPv4Prefix: 32, IPv6Prefix: 48}.KeyFunc(), []keyCase{
		{"ipv6 /48", "[2001:db8:1:2::1]:1", nil, "2001:db8:1::/48"},
	})
}

// TestByIPKeysNAT64ClientsByTheirIPv4Address: behind a stateless IPv4/IPv6
// translator (SIIT, NAT64, NAT46) IPv4 clients connect from addresses of
// the well-known prefix 64:ff9b::/96. Grouped by /64 they all had one key,
// so one client could spend everyone's limit; each is keyed by the IPv4
// address it embeds, in dotted or hex notation, exactly as if it had
// connected over IPv4. A network-specific prefix is translated once named.
func TestByIPKeysNAT64ClientsByTheirIPv4Address(t *testing.T) {
	runKeyCases(t, ratelimit.ByIP(), []keyCase{
		{"well-known", "[64:ff9b::198.51.100.7]:1234", nil, "198.51.100.7"},
		{"well-known, another client", "[64:ff9b::198.51.100.8]:1234", nil, "198.51.100.8"},
		{"well-known hex", "[64:ff9b::c633:6407]:1234", nil, "198.51.100.7"},
		{"ipv4-mapped hex, as before", "[::ffff:c633:6407]:1234", nil, "198.51.100.7"},
		{"local-use, not named", "[64:ff9b:1::198.51.100.7]:1", nil, "64:ff9b:1::/64"},
		{"network-specific, not named", "[2001:db8:64::198.51.100.7]:1", nil, "2001:db8:64::/64"},
	})
	runKeyCases(t, ratelimit.ClientIPConfig{Source: ratelimit.SourcePeer, IPv4Prefix: 24, IPv6Prefix: 64}.KeyFunc(), []keyCase{
		{"well-known /24", "[64:ff9b::198.51.100.7]:1", nil, "198.51.100.0/24"},
	})
	runKeyCases(t, ratelimit.ClientIPConfig{Source: ratelimit.SourcePeer, NAT64Prefixes: []string{"2001:db8:64::/96", "64:ff9b:1::/64"}}.KeyFunc(), []keyCase{
		{"network-specific /96", "[2001:db8:64::198.51.100.7]:1", nil, "198.51.100.7"},
		{"local-use /64", "[64:ff9b:1:0:c6:3364:700:0]:1", nil, "198.51.100.7"},
		{"well-known still", "[64:ff9b::198.51.100.9]:1", nil, "198.51.100.9"},
		{"plain IPv6", "[2001:db8:1:2::1]:1", nil, "2001:db8:1:2::/64"},
		{"plain IPv4", "198.51.100.7:1", nil, "198.51.100.7"},
	})
}

// TestClientIPKeysNAT64ClientsByTheirIPv4Address: the client address a
// trusted proxy reports, and an untrusted peer's own address, are keyed by
// the IPv4 address a translation prefix embeds, as ByIP keys the peer; the
// trust check reads the address as it arrived.
func TestClientIPKeysNAT64ClientsByTheirIPv4Address(t *testing.T) {
	kf := ratelimit.ClientIPConfig{
		TrustedProxies: []string{"2001:db8:ffff::/48"},
		NAT64Prefixes:  []string{"2001:db8:64::/96"},
	}.KeyFunc()
	const lb = "[2001:db8:ffff::1]:443"
	runKeyCases(t, kf, []keyCase{
		{"xff well-known", lb, []string{"X-Forwarded-For: 64:ff9b::198.51.100.7"}, "198.51.100.7"},
		{"xff well-known, another client", lb, []string{"X-Forwarded-For: 64:ff9b::198.51.100.8"}, "198.51.100.8"},
		{"xff network-specific", lb, []string{"X-Forwarded-For: 2001:db8:64::c633:6407"}, "198.51.100.7"},
		{"untrusted peer", "[64:ff9b::198.51.100.7]:1", []string{"X-Forwarded-For: 1.1.1.1"}, "198.51.100.7"},
	})
	fwd := ratelimit.ClientIPConfig{TrustedProxies: []string{"10.0.0.0/8"}, Source: ratelimit.SourceForwarded}.KeyFunc()
	runKeyCases(t, fwd, []keyCase{
		{"forwarded well-known", "10.0.0.1:1", []string{`Forwarded: for="[64:ff9b::198.51.100.7]:4711"`}, "198.51.100.7"},
	})
	// A proxy at an address that embeds a trusted IPv4 address is not
	// trusted: trust is not translated.
	v4lb := ratelimit.ByClientIP("198.51.100.0/24")
	runKeyCases(t, v4lb, []keyCase{
		{"embedded trusted address", "[64:ff9b::198.51.100.1]:1", []string{"X-Forwarded-For: 203.0.113.9"}, "198.51.100.1"},
	})
}

// TestNAT64PrefixesPanicAtStartUp: a translation prefix that RFC 6052 does
// not define, or that overlaps another, would make a key function extract
// the wrong IPv4 address; the configuration is refused before it serves.
func TestNAT64PrefixesPanicAtStartUp(t *testing.T) {
	for _, tt := range []struct {
		name string
		f    func()
		want string
	}{
		{"peer length", func() {
			ratelimit.ClientIPConfig{Source: ratelimit.SourcePeer, NAT64Prefixes: []string{"2001:db8::/72"}}.KeyFunc()
		}, "ratelimit: ClientIPConfig.KeyFunc: NAT64Prefixes"},
		{"peer ipv4", func() {
			ratelimit.ClientIPConfig{Source: ratelimit.SourcePeer, NAT64Prefixes: []string{"10.0.0.0/8"}}.KeyFunc()
		}, "not an IPv6 prefix"},
		{"peer overlap", func() {
			ratelimit.ClientIPConfig{Source: ratelimit.SourcePeer, NAT64Prefixes: []string{"64:ff9b::/32"}}.KeyFunc()
		}, "overlaps the well-known prefix"},
		{"peer v4 prefix", func() { ratelimit.ClientIPConfig{Source: ratelimit.SourcePeer, IPv4Prefix: 33}.KeyFunc() }, "ratelimit: ClientIPConfig.KeyFunc: IPv4Prefix 33"},
		{"client host bits", func() {
			ratelimit.ClientIPConfig{TrustedProxies: []string{"10.0.0.1"}, NAT64Prefixes: []string{"2001:db8::1/96"}}.KeyFunc()
		}, "ratelimit: ClientIPConfig.KeyFunc: NAT64Prefixes"},
		{"client garbage", func() {
			ratelimit.ClientIPConfig{TrustedProxies: []string{"10.0.0.1"}, NAT64Prefixes: []string{"nat64"}}.KeyFunc()
		}, "invalid translation prefix"},
	} {
		if got := kfPanics(tt.f); !strings.HasPrefix(got, "ratelimit: ") || !strings.Contains(got, tt.want) {
			t.Errorf("%s: panic %q, want one containing %q", tt.name, got, tt.want)
		}
	}
}

func TestByIPNoAllocs(t *testing.T) {
	kf := ratelimit.ByIP()
	r := kfReq("192.0.2.1:1234")
	if a := testing.AllocsPerRun(1000, func() { _, _ = kf(r) }); a != 0 {
		t.Errorf("ByIP IPv4: %v allocs/op, want 0", a)
	}
	r6 := kfReq("[2001:db8::1]:1234")
	if a := testing.AllocsPerRun(1000, func() { _, _ = kf(r6) }); a > 1 {
		t.Errorf("ByIP IPv6: %v allocs/op, want at most 1", a)
	}
	r64 := kfReq("[64:ff9b::192.0.2.1]:1234")
	if a := testing.AllocsPerRun(1000, func() { _, _ = kf(r64) }); a > 1 {
		t.Errorf("ByIP NAT64: %v allocs/op, want at most 1", a)
	}
}

func TestByClientIP(t *testing.T) {
	kf := ratelimit.ByClientIP("10.0.0.0/8", "2001:db8:ffff::/48", "192.0.2.10")
	const lb = "10.0.0.1:5555"
	huge := strings.Repeat("10.0.0.7, ", 10000) + "10.0.0.7" // ~100 KB, 10,001 trusted members
	runKeyCases(t, kf, []keyCase{
		// Peer checks.
		{"untrusted peer, no header", "203.0.113.7:1", nil, "203.0.113.7"},
		{"untrusted peer sends XFF", "203.0.113.7:1", []string{"X-Forwarded-For: 1.1.1.1"}, "203.0.113.7"},
		{"untrusted peer sends garbage", "203.0.113.7:1", []string{"X-Forwarded-For: garbage"}, "203.0.113.7"},
		{"untrusted v6 peer", "[2001:db8:1:2::9]:1", []string{"X-Forwarded-For: 1.1.1.1"}, "2001:db8:1:2::/64"},
		{"trusted single address", "192.0.2.10:1", []string{"X-Forwarded-For: 198.51.100.1"}, "198.51.100.1"},
		{"near miss single address", "192.0.2.11:1", []string{"X-Forwarded-For: 198.51.100.1"}, "192.0.2.11"},
		{"mapped trusted peer", "[::ffff:10.0.0.1]:1", []string{"X-Forwarded-For: 198.51.100.1"}, "198.51.100.1"},
		{"zoned trusted peer", "[2001:db8:ffff::1%eth0]:1", []string{"X-Forwarded-For: 198.51.100.1"}, "198.51.100.1"},
		{"bad peer", "", []string{"X-Forwarded-For: 198.51.100.1"}, ""},
		// The walk.
		{"one proxy", lb, []string{"X-Forwarded-For: 203.0.113.7"}, "203.0.113.7"},
		{"client port", lb, []string{"X-Forwarded-For: 203.0.113.7:4711"}, "203.0.113.7"},
		{"chain", lb, []string{"X-Forwarded-For: 203.0.113.7, 10.0.0.3, 10.0.0.2"}, "203.0.113.7"},
		{"ipv6 client grouped", lb, []string{"X-Forwarded-For: 2001:db8:5:6:7::1, 10.0.0.2"}, "2001:db8:5:6::/64"},
		{"mapped client", lb, []string{"X-Forwarded-For: ::ffff:203.0.113.7"}, "203.0.113.7"},
		{"mapped proxy", lb, []string{"X-Forwarded-For: 203.0.113.7, ::ffff:10.0.0.2"}, "203.0.113.7"},
		{"zoned proxy", lb, []string{"X-Forwarded-For: 203.0.113.7, fe80::1%eth0, 2001:db8:ffff::2%1"}, "fe80::/64"},
		// Spoofing attempts.
		{"client-supplied leftmost", lb, []string{"X-Forwarded-For: 1.1.1.1, 203.0.113.7"}, "203.0.113.7"},
		{"client-supplied trusted address", lb, []string{"X-Forwarded-For: 10.1.1.1, 203.0.113.7"}, "203.0.113.7"},
		{"client-supplied line", lb, []string{"X-Forwarded-For: 1.1.1.1", "X-Forwarded-For: 203.0.113.7"}, "203.0.113.7"},
		{"client-supplied garbage", lb, []string{"X-Forwarded-For: unknown, _x, 01.1.1.1, \x00\xff, 203.0.113.7"}, "203.0.113.7"},
		{"client prepends 10,000", lb, []string{"X-Forwarded-For: " + strings.Repeat("1.2.3.4, ", 10000) + "203.0.113.7"}, "203.0.113.7"},
		{"client sends Forwarded too", lb, []string{"Forwarded: for=1.1.1.1", "X-Forwarded-For: 203.0.113.7"}, "203.0.113.7"},
		{"client sends X-Real-IP too", lb, []string{"X-Real-IP: 1.1.1.1", "X-Forwarded-For: 203.0.113.7"}, "203.0.113.7"},
		// Empty list elements are ignored (RFC 9110, section 5.6.1.2).
		{"empty element", lb, []string{"X-Forwarded-For: 198.51.100.9, , 10.0.0.3"}, "198.51.100.9"},
		{"empty elements everywhere", lb, []string{"X-Forwarded-For: ,, 198.51.100.9 ,,\t, 10.0.0.3 ,"}, "198.51.100.9"},
		{"empty line", lb, []string{"X-Forwarded-For: 198.51.100.9", "X-Forwarded-For: ", "X-Forwarded-For: 10.0.0.3"}, "198.51.100.9"},
		{"client's empty element", lb, []string{"X-Forwarded-For: 1.1.1.1, , 198.51.100.9"}, "198.51.100.9"},
		{"31 empty elements", lb, []string{"X-Forwarded-For: 203.0.113.7" + strings.Repeat(",", 31)}, "203.0.113.7"},
		// Fail closed, never fall back.
		{"missing", lb, nil, ""},
		{"only Forwarded", lb, []string{"Forwarded: for=203.0.113.7"}, ""},
		{"only X-Real-IP", lb, []string{"X-Real-IP: 203.0.113.7"}, ""},
		{"all trusted", lb, []string{"X-Forwarded-For: 10.0.0.3, 10.0.0.2"}, ""},
		{"unknown", lb, []string{"X-Forwarded-For: 203.0.113.7, unknown"}, ""},
		{"obfuscated", lb, []string{"X-Forwarded-For: 203.0.113.7, _hidden"}, ""},
		{"leading zeros", lb, []string{"X-Forwarded-For: 203.0.113.07"}, ""},
		{"hex", lb, []string{"X-Forwarded-For: 0xcb.0.113.7"}, ""},
		{"out of range", lb, []string{"X-Forwarded-For: 203.0.113.256"}, ""},
		{"short form", lb, []string{"X-Forwarded-For: 203.113.7"}, ""},
		{"NUL", lb, []string{"X-Forwarded-For: 203.0.113.7\x00"}, ""},
		{"high bytes", lb, []string{"X-Forwarded-For: 203.0.113.7\xc2\xa0"}, ""},
		{"empty value", lb, []string{"X-Forwarded-For: "}, ""},
		{"only empty elements", lb, []string{"X-Forwarded-For: , ,\t,"}, ""},
		{"empty elements then all trusted", lb, []string{"X-Forwarded-For: , 10.0.0.3, , 10.0.0.2"}, ""},
		{"33 empty elements before the client", lb, []string{"X-Forwarded-For: 203.0.113.7" + strings.Repeat(",", 33)}, ""},
		{"garbage behind empty elements", lb, []string{"X-Forwarded-For: 203.0.113.7, garbage, , 10.0.0.2"}, ""},
		{"garbage behind trusted", lb, []string{"X-Forwarded-For: 203.0.113.7, garbage, 10.0.0.2"}, ""},
		{"overlong trusted 100KB", lb, []string{"X-Forwarded-For: " + huge}, ""},
		{"overlong member", lb, []string{"X-Forwarded-For: " + strings.Repeat("1", 100000)}, ""},
		{"10,000 lines", lb, strings.Split("X-Forwarded-For: "+strings.Repeat("10.0.0.7\nX-Forwarded-For: ", 10000)+"10.0.0.7", "\n"), ""},
	})
}

func TestClientIPConfigKeyFuncReadsForwarded(t *testing.T) {
	kf := ratelimit.ClientIPConfig{
		TrustedProxies: []string{"10.0.0.0/8", "2001:db8:ffff::/48"},
		Source:         ratelimit.SourceForwarded,
		IPv6Prefix:     128,
	}.KeyFunc()
	const lb = "10.0.0.1:5555"
	runKeyCases(t, kf, []keyCase{
		{"untrusted peer", "203.0.113.7:1", []string{"Forwarded: for=1.1.1.1"}, "203.0.113.7"},
		{"simple", lb, []string{"Forwarded: for=203.0.113.7"}, "203.0.113.7"},
		{"quoted ipv6 port", lb, []string{`Forwarded: for="[2001:db8:cafe::17]:4711"`}, "2001:db8:cafe::17"},
		{"case-insensitive name", lb, []string{`Forwarded: FoR=203.0.113.7;Proto=https`}, "203.0.113.7"},
		{"chain", lb, []string{`Forwarded: for=203.0.113.7;proto=https, for="[2001:db8:ffff::1]";by=10.0.0.1`}, "203.0.113.7"},
		{"two lines", lb, []string{"Forwarded: for=1.1.1.1, for=203.0.113.7", "Forwarded: for=10.0.0.2"}, "203.0.113.7"},
		{"spoofed unbalanced quote", lb, []string{`Forwarded: for="1.1.1.1, for=203.0.113.7`}, "203.0.113.7"},
		{"spoofed XFF ignored", lb, []string{"X-Forwarded-For: 1.1.1.1", "Forwarded: for=203.0.113.7"}, "203.0.113.7"},
		{"missing, XFF present", lb, []string{"X-Forwarded-For: 203.0.113.7"}, ""},
		{"unknown", lb, []string{"Forwarded: for=unknown"}, ""},
		{"obfuscated", lb, []string{`Forwarded: for="_gazonk"`}, ""},
		{"no for", lb, []string{"Forwarded: proto=https"}, ""},
		{"unquoted ipv6", lb, []string{"Forwarded: for=[2001:db8::1]"}, ""},
		{"duplicate for", lb, []string{"Forwarded: for=203.0.113.7;for=10.0.0.9"}, ""},
		{"all trusted", lb, []string{"Forwarded: for=10.0.0.9"}, ""},
		{"empty element", lb, []string{"Forwarded: for=198.51.100.9, , for=10.0.0.3"}, "198.51.100.9"},
		{"empty elements and lines", lb, []string{"Forwarded: ,for=198.51.100.9;proto=https,\t,", "Forwarded: ", "Forwarded: for=10.0.0.3,"}, "198.51.100.9"},
		{"only empty elements", lb, []string{"Forwarded: , , "}, ""},
		{"empty pairs are not an empty element", lb, []string{"Forwarded: for=198.51.100.9, ;, for=10.0.0.3"}, ""},
		{"too many empty elements", lb, []string{"Forwarded: for=198.51.100.9" + strings.Repeat(", ", 40)}, ""},
		{"overlong", lb, []string{"Forwarded: " + strings.Repeat("for=10.0.0.7, ", 10000) + "for=10.0.0.7"}, ""},
	})
}

func TestClientIPHopsTakesTheNthMemberFromTheRight(t *testing.T) {
	runKeyCases(t, ratelimit.ClientIPConfig{Hops: 1}.KeyFunc(), []keyCase{
		{"one hop", "10.0.0.1:1", []string{"X-Forwarded-For: 1.1.1.1, 203.0.113.7"}, "203.0.113.7"},
		{"peer not checked", "198.51.100.1:1", []string{"X-Forwarded-For: 203.0.113.7"}, "203.0.113.7"},
		{"missing", "10.0.0.1:1", nil, ""},
		{"garbage", "10.0.0.1:1", []string{"X-Forwarded-For: 1.1.1.1, unknown"}, ""},
	})
	runKeyCases(t, ratelimit.ClientIPConfig{Hops: 2}.KeyFunc(), []keyCase{
		{"two hops", "10.0.0.1:1", []string{"X-Forwarded-For: 1.1.1.1, 203.0.113.7, 10.9.9.9"}, "203.0.113.7"},
		{"over lines", "10.0.0.1:1", []string{"X-Forwarded-For: 203.0.113.7", "X-Forwarded-For: 10.9.9.9"}, "203.0.113.7"},
		{"too few", "10.0.0.1:1", []string{"X-Forwarded-For: 203.0.113.7"}, ""},
		{"garbage proxy", "10.0.0.1:1", []string{"X-Forwarded-For: 203.0.113.7, x"}, ""},
	})
	kf := ratelimit.ClientIPConfig{Hops: 1, TrustedProxies: []string{"10.0.0.0/8"}}.KeyFunc()
	runKeyCases(t, kf, []keyCase{
		{"trusted peer", "10.0.0.1:1", []string{"X-Forwarded-For: 203.0.113.7"}, "203.0.113.7"},
		{"untrusted peer", "198.51.100.1:1", []string{"X-Forwarded-For: 203.0.113.7"}, "198.51.100.1"},
	})
}

func TestClientIPHeaderTrustsOneAddressFromTrustedPeers(t *testing.T) {
	kf := ratelimit.ClientIPConfig{Source: ratelimit.SourceHeader, Header: "CF-Connecting-IP", TrustedProxies: []string{"173.245.48.0/20", "2400:cb00::/32"}}.KeyFunc()
	const cf = "173.245.48.1:443"
	runKeyCases(t, kf, []keyCase{
		{"from edge", cf, []string{"CF-Connecting-IP: 203.0.113.7"}, "203.0.113.7"},
		{"ipv6 from edge", "[2400:cb00::1]:443", []string{"Cf-Connecting-Ip: 2001:db8:1:2::5"}, "2001:db8:1:2::/64"},
		{"mapped", cf, []string{"CF-Connecting-IP: ::ffff:203.0.113.7"}, "203.0.113.7"},
		{"untrusted peer spoofs", "203.0.113.7:1", []string{"CF-Connecting-IP: 1.1.1.1"}, "203.0.113.7"},
		{"missing", cf, nil, ""},
		{"missing, XFF present", cf, []string{"X-Forwarded-For: 203.0.113.7"}, ""},
		{"repeated", cf, []string{"CF-Connecting-IP: 203.0.113.7", "CF-Connecting-IP: 1.1.1.1"}, ""},
		{"list", cf, []string{"CF-Connecting-IP: 1.1.1.1, 203.0.113.7"}, ""},
		{"garbage", cf, []string{"CF-Connecting-IP: unknown"}, ""},
		{"leading zero", cf, []string{"CF-Connecting-IP: 203.0.113.07"}, ""},
		{"NUL", cf, []string{"CF-Connecting-IP: 203.0.113.7\x00"}, ""},
	})
}

func TestClientIPConfigPanics(t *testing.T) {
	tests := []struct {
		name string
		f    func()
		want string
	}{
		{"no proxies", func() { ratelimit.ByClientIP() }, "ratelimit: ByClientIP: no trusted proxies"},
		{"bad cidr", func() { ratelimit.ByClientIP("10.0.0.0/33") }, "ratelimit: ByClientIP: invalid trusted proxy"},
		{"host bits", func() { ratelimit.ByClientIP("10.0.0.1/8") }, "did you mean 10.0.0.0/8?"},
		{"slash zero", func() { ratelimit.ByClientIP("0.0.0.0/0") }, "trusts every address"},
		{"v6 slash zero", func() { ratelimit.ByClientIP("::/0") }, "trusts every address"},
		{"zone", func() { ratelimit.ByClientIP("fe80::1%eth0") }, "zone"},
		{"hostname", func() { ratelimit.ByClientIP("lb.internal") }, "ratelimit: ByClientIP: invalid trusted proxy"},
		{"empty entry", func() { ratelimit.ByClientIP("") }, "ratelimit: ByClientIP: empty trusted proxy"},
		{"leading zero", func() { ratelimit.ByClientIP("010.0.0.1") }, "ratelimit: ByClientIP: invalid trusted proxy"},
		{"hops negative", func() { ratelimit.ClientIPConfig{Hops: -1}.KeyFunc() }, "ratelimit: ClientIPConfig.KeyFunc: Hops -1"},
		{"hops big", func() { ratelimit.ClientIPConfig{Hops: 33}.KeyFunc() }, "ratelimit: ClientIPConfig.KeyFunc: Hops 33"},
		{"header empty", func() {
			ratelimit.ClientIPConfig{Source: ratelimit.SourceHeader, Header: "", TrustedProxies: []string{"10.0.0.1"}}.KeyFunc()
		}, "ratelimit: ClientIPConfig.KeyFunc: SourceHeader needs a Header"},
		{"header invalid", func() {
			ratelimit.ClientIPConfig{Source: ratelimit.SourceHeader, Header: "X Real IP", TrustedProxies: []string{"10.0.0.1"}}.KeyFunc()
		}, "ratelimit: ClientIPConfig.KeyFunc: invalid header name"},
		{"header list", func() {
			ratelimit.ClientIPConfig{Source: ratelimit.SourceHeader, Header: "x-forwarded-for", TrustedProxies: []string{"10.0.0.1"}}.KeyFunc()
		}, "is a list"},
		{"header no proxies", func() {
			ratelimit.ClientIPConfig{Source: ratelimit.SourceHeader, Header: "X-Real-IP", TrustedProxies: nil}.KeyFunc()
		}, "ratelimit: ClientIPConfig.KeyFunc: no trusted proxies"},
		{"source", func() {
			ratelimit.ClientIPConfig{TrustedProxies: []string{"10.0.0.1"}, Source: 9}.KeyFunc()
		}, "unknown ClientIPSource"},
		{"max members", func() {
			ratelimit.ClientIPConfig{TrustedProxies: []string{"10.0.0.1"}, MaxMembers: -1}.KeyFunc()
		}, "MaxMembers"},
		{"max members big", func() {
			ratelimit.ClientIPConfig{TrustedProxies: []string{"10.0.0.1"}, MaxMembers: 5000}.KeyFunc()
		}, "MaxMembers"},
		{"negative hops", func() { ratelimit.ClientIPConfig{Hops: -1}.KeyFunc() }, "ratelimit: ClientIPConfig.KeyFunc: Hops -1"},
		{"v4 prefix", func() {
			ratelimit.ClientIPConfig{TrustedProxies: []string{"10.0.0.1"}, IPv4Prefix: 33}.KeyFunc()
		}, "IPv4Prefix"},
		{"v6 prefix", func() {
			ratelimit.ClientIPConfig{TrustedProxies: []string{"10.0.0.1"}, IPv6Prefix: -1}.KeyFunc()
		}, "IPv6Prefix"},
		{"hops with header", func() {
			ratelimit.ClientIPConfig{TrustedProxies: []string{"10.0.0.1"}, Source: ratelimit.SourceHeader, Header: "X-Real-IP", Hops: 1}.KeyFunc()
		}, "Hops does not apply"},
		{"format mismatch", func() {
			ratelimit.ClientIPConfig{TrustedProxies: []string{"10.0.0.1"}, Header: "Forwarded"}.KeyFunc()
		}, "does not have the format of X-Forwarded-For"},
		{"format mismatch 2", func() {
			ratelimit.ClientIPConfig{TrustedProxies: []string{"10.0.0.1"}, Source: ratelimit.SourceForwarded, Header: "x-forwarded-for"}.KeyFunc()
		}, "does not have the format of Forwarded"},
		{"peer v6 prefix", func() { ratelimit.ClientIPConfig{Source: ratelimit.SourcePeer, IPv6Prefix: 129}.KeyFunc() }, "ratelimit: ClientIPConfig.KeyFunc: IPv6Prefix 129"},
		{"peer negative v4 prefix", func() { ratelimit.ClientIPConfig{Source: ratelimit.SourcePeer, IPv4Prefix: -1}.KeyFunc() }, "ratelimit: ClientIPConfig.KeyFunc: IPv4Prefix -1"},
		{"peer with trusted proxies", func() {
			ratelimit.ClientIPConfig{Source: ratelimit.SourcePeer, TrustedProxies: []string{"10.0.0.0/8"}}.KeyFunc()
		}, "ratelimit: ClientIPConfig.KeyFunc: SourcePeer reads no header"},
		{"peer with a header", func() { ratelimit.ClientIPConfig{Source: ratelimit.SourcePeer, Header: "X-Real-IP"}.KeyFunc() }, "SourcePeer reads no header"},
		{"peer with hops", func() { ratelimit.ClientIPConfig{Source: ratelimit.SourcePeer, Hops: 1}.KeyFunc() }, "SourcePeer reads no header"},
	}
	for _, tt := range tests {
		got := kfPanics(tt.f)
		if !strings.HasPrefix(got, "ratelimit: ") || !strings.Contains(got, tt.want) {
			t.Errorf("%s: panic %q, want one containing %q", tt.name, got, tt.want)
		}
	}
	// Valid configurations do not panic.
	for _, f := range []func(){
		func() { ratelimit.ByClientIP("10.0.0.0/8", "192.0.2.1", "2001:db8::/32", "::1", "::ffff:10.0.0.0/104") },
		func() { ratelimit.ClientIPConfig{Hops: 32}.KeyFunc() },
		func() {
			ratelimit.ClientIPConfig{Hops: 3, MaxMembers: 3, Source: ratelimit.SourceForwarded, Header: "X-Forwarded"}.KeyFunc()
		},
	} {
		if msg := kfPanics(f); msg != "" {
			t.Errorf("unexpected panic %q", msg)
		}
	}
}

func TestClientIPBoundedAllocs(t *testing.T) {
	kf := ratelimit.ByClientIP("10.0.0.0/8")
	for _, tt := range []struct {
		name string
		r    *http.Request
	}{
		{"typical", kfReq("10.0.0.1:1", "X-Forwarded-For: 198.51.100.1, 203.0.113.7, 10.0.0.2")},
		{"100KB prepended", kfReq("10.0.0.1:1", "X-Forwarded-For: "+strings.Repeat("1.2.3.4, ", 10000)+"203.0.113.7")},
		{"100KB trusted, fails closed", kfReq("10.0.0.1:1", "X-Forwarded-For: "+strings.Repeat("10.0.0.7, ", 10000)+"10.0.0.7")},
		{"100KB garbage, fails closed", kfReq("10.0.0.1:1", "X-Forwarded-For: "+strings.Repeat("x", 100000))},
	} {
		if a := testing.AllocsPerRun(100, func() { _, _ = kf(tt.r) }); a != 0 {
			t.Errorf("%s: %v allocs/op, want 0", tt.name, a)
		}
	}
}

func BenchmarkByIP(b *testing.B) {
	for _, c := range []struct{ name, peer string }{
		{"IPv4", "192.0.2.1:1234"},
		{"IPv6", "[2001:db8::1]:1234"},
	} {
		b.Run(c.name, func(b *testing.B) {
			kf := ratelimit.ByIP()
			r := kfReq(c.peer)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := kf(r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkByClientIP(b *testing.B) {
	trusted := []string{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "2001:db8:ffff::/48"}
	for _, c := range []struct {
		name   string
		source ratelimit.ClientIPSource
		header string
	}{
		{"XFF/typical", ratelimit.SourceXForwardedFor, "X-Forwarded-For: 198.51.100.1, 203.0.113.7, 10.0.0.2"},
		{"XFF/hostile-100KB-prepended", ratelimit.SourceXForwardedFor, "X-Forwarded-For: " + strings.Repeat("1.2.3.4, ", 10000) + "203.0.113.7"},
		{"XFF/hostile-100KB-10000-trusted", ratelimit.SourceXForwardedFor, "X-Forwarded-For: " + strings.Repeat("10.0.0.7, ", 10000) + "10.0.0.7"},
		{"Forwarded/typical", ratelimit.SourceForwarded, `Forwarded: for=203.0.113.7;proto=https, for="[2001:db8:ffff::1]:80"`},
		{"Forwarded/hostile-100KB-10000-trusted", ratelimit.SourceForwarded, "Forwarded: " + strings.Repeat("for=10.0.0.7, ", 10000) + "for=10.0.0.7"},
	} {
		b.Run(c.name, func(b *testing.B) {
			kf := ratelimit.ClientIPConfig{TrustedProxies: trusted, Source: c.source}.KeyFunc()
			r := kfReq("10.0.0.1:1234", c.header)
			b.ReportAllocs()
			for b.Loop() {
				_, _ = kf(r)
			}
		})
	}
}
