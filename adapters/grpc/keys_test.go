package ratelimitgrpc_test

import (
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"google.golang.org/grpc/codes"
)

func TestByIPKeysByPeerAndIgnoresForwardedMetadata(t *testing.T) {
	l := ratelimit.NewLimiter(ratelimit.PerMinute(1), ratelimit.ByIP(), ratelimit.WithClock(ratelimittest.NewClock(time.Time{})))
	e := newEnv(t, l)
	a, b := e.dial(peerAddr(1)), e.dial(peerAddr(2))
	if _, err := call(t, a, ping, "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := call(t, b, ping, "x"); err != nil {
		t.Fatalf("another peer shares the first one's bucket: %v", err)
	}
	_, err := call(t, a, ping, "x", "x-forwarded-for", "203.0.113.7", "x-real-ip", "203.0.113.8")
	mustCode(t, err, codes.ResourceExhausted)
}

func TestByClientIPBelievesForwardedMetadataOnlyFromTrustedProxies(t *testing.T) {
	var keys ratelimittest.KeyRecorder
	l := ratelimit.NewLimiter(ratelimit.PerMinute(1), keys.Wrap(ratelimit.ByClientIP("10.0.0.0/8")),
		ratelimit.WithClock(ratelimittest.NewClock(time.Time{})))
	e := newEnv(t, l)

	proxy := e.dial("10.1.2.3:5000")
	for _, client := range []string{"203.0.113.1", "203.0.113.2"} {
		if _, err := call(t, proxy, ping, "x", "x-forwarded-for", client); err != nil {
			t.Fatalf("client %s behind the trusted proxy: %v", client, err)
		}
		if k, _ := keys.MustLast(t); k != client {
			t.Fatalf("key %q behind the trusted proxy, want the forwarded client %q", k, client)
		}
	}
	_, err := call(t, proxy, ping, "x", "x-forwarded-for", "203.0.113.1")
	mustCode(t, err, codes.ResourceExhausted)

	// A client connecting directly cannot choose its key by sending the
	// metadata a proxy would add: every spoofed value lands in the bucket
	// of its own address.
	spoofer := e.dial("198.51.100.9:6000")
	if _, err := call(t, spoofer, ping, "x", "x-forwarded-for", "203.0.113.50"); err != nil {
		t.Fatal(err)
	}
	if k, _ := keys.MustLast(t); k != "198.51.100.9" {
		t.Fatalf("untrusted peer keyed as %q, want its own address", k)
	}
	for _, spoof := range []string{"203.0.113.51", "10.0.0.1", "203.0.113.52, 10.1.2.3"} {
		_, err := call(t, spoofer, ping, "x", "x-forwarded-for", spoof)
		mustCode(t, err, codes.ResourceExhausted)
	}
}

func TestByClientIPReadsForwardedMetadata(t *testing.T) {
	var keys ratelimittest.KeyRecorder
	l := ratelimit.NewLimiter(ratelimit.PerMinute(10), keys.Wrap(ratelimit.ClientIPConfig{
		TrustedProxies: []string{"10.0.0.0/8"}, Source: ratelimit.SourceForwarded,
	}.KeyFunc()))
	e := newEnv(t, l)
	if _, err := call(t, e.dial("10.1.2.3:5000"), ping, "x", "forwarded", "for=203.0.113.60;proto=https"); err != nil {
		t.Fatal(err)
	}
	if k, _ := keys.MustLast(t); k != "203.0.113.60" {
		t.Fatalf("key %q, want the forwarded address", k)
	}
	if _, err := call(t, e.dial("198.51.100.9:6000"), ping, "x", "forwarded", "for=203.0.113.60"); err != nil {
		t.Fatal(err)
	}
	if k, _ := keys.MustLast(t); k != "198.51.100.9" {
		t.Fatalf("untrusted peer keyed as %q, want its own address", k)
	}
}

// A peer that is not an IP address has no IP key: the key-error policy
// answers, as for an HTTP request over a Unix socket.
func TestPeerWithoutIPGetsKeyError(t *testing.T) {
	l := ratelimit.NewLimiter(ratelimit.PerMinute(10), ratelimit.ByIP())
	conn := newEnv(t, l).dialAddr(&net.UnixAddr{Name: "/run/app.sock", Net: "unix"})
	_, err := call(t, conn, ping, "x")
	mustCode(t, err, codes.InvalidArgument)
}

// Token keys hash metadata exactly as they hash the same HTTP header, and
// never use the secret in clear.
func TestMetadataKeysMatchHTTPHeaderKeys(t *testing.T) {
	tests := []struct {
		name   string
		key    ratelimit.KeyFunc
		md     []string
		secret string
	}{
		{"ByAPIKey", ratelimit.ByAPIKey("X-API-Key"), []string{"x-api-key", "k3y-alpha"}, "k3y-alpha"},
		{"ByBearerToken", ratelimit.ByBearerToken(), []string{"authorization", "Bearer tok.en-1"}, "tok.en-1"},
		{"ByHeader", ratelimit.ByHeader("X-Tenant"), []string{"x-tenant", "acme"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var keys ratelimittest.KeyRecorder
			key := keys.Wrap(tt.key)
			l := ratelimit.NewLimiter(ratelimit.PerMinute(1), key, ratelimit.WithClock(ratelimittest.NewClock(time.Time{})))
			e := newEnv(t, l)
			conn := e.dial(peerAddr(1))
			if _, err := call(t, conn, ping, "x", tt.md...); err != nil {
				t.Fatal(err)
			}
			got, err := keys.MustLast(t)
			if err != nil {
				t.Fatal(err)
			}
			want, err := key(ratelimittest.NewRequest(http.MethodPost, ping, "", http.CanonicalHeaderKey(tt.md[0]), tt.md[1]))
			if err != nil || got != want {
				t.Fatalf("gRPC key %q, HTTP key %q (%v)", got, want, err)
			}
			if tt.secret != "" && strings.Contains(got, tt.secret) {
				t.Fatalf("key %q holds the secret in clear", got)
			}
			// Same metadata, same bucket, from any peer; another value is
			// another bucket; none is a key error.
			_, err = call(t, e.dial(peerAddr(2)), ping, "x", tt.md...)
			mustCode(t, err, codes.ResourceExhausted)
			other := []string{tt.md[0], tt.md[1] + "2"}
			if _, err := call(t, conn, ping, "x", other...); err != nil {
				t.Fatalf("another %s value shares the bucket: %v", tt.md[0], err)
			}
			_, err = call(t, conn, ping, "x")
			mustCode(t, err, codes.InvalidArgument)
			_, err = call(t, conn, ping, "x", tt.md[0], tt.md[1], tt.md[0], tt.md[1]+"3")
			mustCode(t, err, codes.InvalidArgument) // repeated: ambiguous
		})
	}
}

func TestByRouteKeysByFullMethod(t *testing.T) {
	var keys ratelimittest.KeyRecorder
	l := ratelimit.NewLimiter(ratelimit.PerMinute(1), ratelimit.Keys(ratelimit.ByIP(), keys.Wrap(ratelimit.ByRoute())),
		ratelimit.WithClock(ratelimittest.NewClock(time.Time{})))
	conn := newEnv(t, l).dial(peerAddr(1))
	for _, m := range []string{ping, pong} {
		if _, err := call(t, conn, m, "x"); err != nil {
			t.Fatalf("%s: %v", m, err)
		}
		if k, _ := keys.MustLast(t); k != m {
			t.Fatalf("route key %q, want the full method %q", k, m)
		}
		_, err := call(t, conn, m, "x")
		mustCode(t, err, codes.ResourceExhausted)
	}
	if _, _, err := openChat(t, conn); err != nil {
		t.Fatalf("the stream method has its own bucket: %v", err)
	}
	if k, _ := keys.MustLast(t); k != chat {
		t.Fatalf("stream route key %q, want %q", k, chat)
	}
}
