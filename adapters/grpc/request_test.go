package ratelimitgrpc_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"google.golang.org/grpc/codes"
)

// The request key functions see describes the RPC: POST to the full
// method, the peer, the metadata as canonical header fields (no
// pseudo-headers), the :authority as Host, and the RPC's context.
func TestRequestDescribesTheRPC(t *testing.T) {
	seen := make(chan *http.Request, 1)
	key := func(r *http.Request) (string, error) {
		seen <- r
		return "k", nil
	}
	l := ratelimit.NewLimiter(ratelimit.PerMinute(10), key)
	e := newEnv(t, l)
	conn := e.dial(peerAddr(7))
	if _, err := call(t, conn, ping, "x", "x-api-key", "a", "x-multi", "1", "x-multi", "2"); err != nil {
		t.Fatal(err)
	}
	r := <-seen
	checks := []struct {
		what      string
		got, want any
	}{
		{"Method", r.Method, http.MethodPost},
		{"URL.Path", r.URL.Path, ping},
		{"Pattern", r.Pattern, ping},
		{"RemoteAddr", r.RemoteAddr, peerAddr(7)},
		{"Host", r.Host, "bufnet"},
		{"ProtoMajor", r.ProtoMajor, 2},
		{"X-Api-Key", r.Header.Get("X-Api-Key"), "a"},
		{"X-Multi", len(r.Header.Values("X-Multi")), 2},
		{"Content-Type", r.Header.Get("Content-Type"), "application/grpc"},
		{":authority", len(r.Header[":authority"]) + len(r.Header[":Authority"]), 0},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
		}
	}
	if _, ok := r.Context().Deadline(); !ok {
		t.Error("the request's context lacks the RPC's deadline")
	}
}

// Values that earlier interceptors put in the context (authUnary and
// authStream here) reach key functions, so that ByUser keys by the
// authenticated identity.
func TestByUserReadsContextOfEarlierInterceptors(t *testing.T) {
	var keys ratelimittest.KeyRecorder
	l := ratelimit.NewLimiter(ratelimit.PerMinute(1), keys.Wrap(ratelimit.ByUser(func(r *http.Request) (string, bool) {
		u, ok := r.Context().Value(userKey{}).(string)
		return u, ok
	})), ratelimit.WithClock(ratelimittest.NewClock(time.Time{})))
	conn := newEnv(t, l).dial(peerAddr(1))
	if _, err := call(t, conn, ping, "x", "x-user", "alice"); err != nil {
		t.Fatal(err)
	}
	if k, _ := keys.MustLast(t); k != "alice" {
		t.Fatalf("key %q, want alice", k)
	}
	_, _, err := openChat(t, conn, "x-user", "alice")
	mustCode(t, err, codes.ResourceExhausted)
	if _, _, err := openChat(t, conn, "x-user", "bob"); err != nil {
		t.Fatal(err)
	}
	_, err = call(t, conn, ping, "x") // anonymous: the key-error policy
	mustCode(t, err, codes.InvalidArgument)
}

// ratelimit.WithSkip sees the same request: it can skip by method.
func TestWithSkipSeesFullMethod(t *testing.T) {
	l := ratelimit.NewLimiter(ratelimit.PerMinute(1), ratelimit.ByIP(),
		ratelimit.WithClock(ratelimittest.NewClock(time.Time{})),
		ratelimit.WithSkip(func(r *http.Request) bool { return r.Pattern == pong }))
	conn := newEnv(t, l).dial(peerAddr(1))
	for range 3 {
		if _, err := call(t, conn, pong, "x"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := call(t, conn, ping, "x"); err != nil {
		t.Fatal(err)
	}
	_, err := call(t, conn, ping, "x")
	mustCode(t, err, codes.ResourceExhausted)
}
