package ratelimit_test

import (
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/sluicehq/ratelimit"
)

func TestPeerKeyParsesAConnectionsAddressOnce(t *testing.T) {
	for _, c := range []struct {
		name, peer, want string
		kf               ratelimit.KeyFunc
	}{
		{"IPv6 by /64", "[2001:db8:1:2::7]:443", "2001:db8:1:2::/64", ratelimit.ClientIPConfig{Source: ratelimit.SourcePeer}.KeyFunc()},
		{"IPv4 by /24", "192.0.2.77:443", "192.0.2.0/24", ratelimit.ClientIPConfig{Source: ratelimit.SourcePeer, IPv4Prefix: 24}.KeyFunc()},
	} {
		// Every request of a connection carries the same RemoteAddr.
		r := kfReq(c.peer)
		if key, err := c.kf(r); err != nil || key != c.want {
			t.Fatalf("%s: key %q, %v, want %q", c.name, key, err, c.want)
		}
		// Formatting the key allocates; the connection's later requests
		// find it.
		if a := testing.AllocsPerRun(100, func() { _, _ = c.kf(r) }); a != 0 {
			t.Errorf("%s: %v allocs a request of one connection, want 0", c.name, a)
		}
	}
}

func TestPeerKeyGivesEachConnectionItsOwnAddressesKey(t *testing.T) {
	kf := ratelimit.ClientIPConfig{Source: ratelimit.SourcePeer, IPv4Prefix: 32, IPv6Prefix: 64}.KeyFunc()
	// More connections than the cache holds, IPv4 and IPv6, and some pairs
	// of connections from one address.
	const conns = 2000
	peers := make([]string, conns)
	want := make([]string, conns)
	for i := range peers {
		host := fmt.Sprintf("10.0.%d.%d", i/250, i%250+1)
		wantKey := host
		if i%3 == 0 {
			a := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 0, byte(i / 7), byte(i % 7), 15: 1})
			host = "[" + a.String() + "]"
			wantKey = netip.PrefixFrom(a, 64).Masked().String()
		}
		peers[i] = fmt.Sprintf("%s:%d", host, 1024+i)
		if i%10 == 0 && i > 0 {
			peers[i] = strings.Clone(peers[i-10]) // the same text, another string
			wantKey = want[i-10]
		}
		want[i] = wantKey
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for round := range 20 {
				for i := range peers {
					j := (i*7 + g*conns/4 + round) % conns
					r := kfReq(peers[j])
					if key, err := kf(r); err != nil || key != want[j] {
						t.Errorf("key of %s: %q, %v, want %q", peers[j], key, err, want[j])
						return
					}
				}
			}
		})
	}
	wg.Wait()
}

// TestPeerKeyOfAnAddressInAReusedBuffer: a server or adaptor that gives
// RemoteAddr the bytes of a buffer it reuses after the handler returns
// (fasthttpadaptor's documented contract for its request's memory) hands
// a later client's address in the same bytes, at the same place and of
// the same length. That client must get its own key, not the one cached
// for the address the bytes held before.
func TestPeerKeyOfAnAddressInAReusedBuffer(t *testing.T) {
	for _, c := range []struct {
		prefix int
		peers  []string // each of the same length
		want   []string
	}{
		// A key that is a substring of RemoteAddr: the second client's
		// would read "1.2.3.4", the first's key, out of its own bytes.
		{32, []string{"1.2.3.4:56789", "1.2.3.44:5678", "1.2.3.4:56789"}, []string{"1.2.3.4", "1.2.3.44", "1.2.3.4"}},
		// A key of its own: the second client would get the first's.
		{24, []string{"192.0.2.1:1234", "203.0.113.9:12"}, []string{"192.0.2.0/24", "203.0.113.0/24"}},
	} {
		kf := ratelimit.ClientIPConfig{Source: ratelimit.SourcePeer, IPv4Prefix: c.prefix}.KeyFunc()
		buf := make([]byte, 0, 32)
		for i, peer := range c.peers {
			buf = append(buf[:0], peer...)
			r := kfReq(unsafe.String(unsafe.SliceData(buf), len(buf)))
			for range 3 { // a connection's requests
				if key, err := kf(r); err != nil || key != c.want[i] {
					t.Fatalf("/%d: key of %s in a reused buffer: %q, %v, want %q", c.prefix, peer, key, err, c.want[i])
				}
			}
		}
	}
}
