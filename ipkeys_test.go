package ratelimit_test

import (
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"

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
