package ratelimittest

import (
	"bufio"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
)

// ServedBy is the response header the handlers of a carve-out test set to
// name themselves: the carve-out's own handler sets it to its path, every
// other handler to anything else.
const ServedBy = "X-Served-By"

// Probe is one request of a carve-out table: a method and a request
// target written as is on the request line.
type Probe struct {
	Method, Target string
}

// CarveOutProbes returns requests that look like the carve-out path p
// (such as "/healthz") to one router or another: the exact path, other
// methods, trailing and doubled slashes, escapes, case, dot segments,
// parameters, a query. p must start with "/" and a letter.
func CarveOutProbes(p string) []Probe {
	esc := "/%" + strings.ToUpper(hexByte(p[1])) + p[2:] // "/%68ealthz"
	targets := []string{
		p, p + "?x=1", p + "/", "/" + p, p + "//", p + "%2F", p + "%2f", esc,
		strings.ToUpper(p), p + ";x", p + "/../api", "/api/.." + p, "/." + p,
		p + "/.", p + "/x", p + "x", p + "%20", p + "%00", p + "#x", p + "/%2e%2e/api",
		"http://example.com" + p, "//example.com" + p,
	}
	var probes []Probe
	for _, m := range []string{"GET", "HEAD"} {
		for _, t := range targets {
			probes = append(probes, Probe{m, t})
		}
	}
	for _, m := range []string{"POST", "PUT", "DELETE", "OPTIONS", "PATCH", "get"} {
		probes = append(probes, Probe{m, p})
	}
	return probes
}

func hexByte(b byte) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[b>>4], digits[b&15]})
}

// CarveOutProber checks that carve-outs never let a request bypass the
// limit: install it as the limiter's observer (ratelimit.WithObserver) and
// call Check. The zero value is ready to use; it is safe for concurrent
// use.
type CarveOutProber struct {
	skipped atomic.Int64
}

// Observe counts the requests the limiter skipped.
func (p *CarveOutProber) Observe(e ratelimit.Event) {
	if e.Outcome == ratelimit.OutcomeSkipped {
		p.skipped.Add(1)
	}
}

// Check sends the CarveOutProbes of every path through h twice: in
// process (a request parsed from the raw request line, as a server would)
// and to a live httptest.Server over a raw request line on a net.Conn, so
// that targets Go's client would rewrite reach the router as sent. The
// limit must be exhausted for every client, so that a request the limiter counts gets 429: Check first sends
// GET /ratelimittest-exhausted until it gets 429 (use a limit of a few
// requests on a global key, on a clock that stands still).
//
// It fails the test when a request the limiter skipped was not served by
// the handler whose ServedBy header names the probed path, when any other
// handler served a request without the limiter counting it, when GET p or
// GET p?x=1 was not carved out, or when one of the requests that must stay
// limited (POST, upper case, ";x", "/../") was skipped. It returns, for the
// live server, which probes were skipped, for further checks.
func (p *CarveOutProber) Check(t *testing.T, h http.Handler, paths ...string) map[Probe]bool {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	exhausted := Probe{"GET", "/ratelimittest-exhausted"}
	for i := 0; ; i++ {
		if resp, _ := p.inProcess(h, exhausted); resp.Code == http.StatusTooManyRequests {
			break
		}
		if i == 1000 {
			t.Fatalf("in process, %v: no 429 after %d requests: use a small limit on a global key", exhausted, i)
		}
	}
	if resp, _ := p.live(t, srv.Listener.Addr().String(), exhausted); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("live, %v: the limit is not exhausted (status %d)", exhausted, resp.StatusCode)
	}
	skipped := map[Probe]bool{}
	for _, path := range paths {
		for _, pr := range CarveOutProbes(path) {
			if resp, ok := p.inProcess(h, pr); ok {
				checkProbe(t, "in process", path, pr, resp.Code, resp.Header().Get(ServedBy), resp.skipped)
			}
			resp, skip := p.live(t, srv.Listener.Addr().String(), pr)
			checkProbe(t, "live", path, pr, resp.StatusCode, resp.Header.Get(ServedBy), skip)
			skipped[pr] = skip
		}
		for _, must := range []Probe{{"GET", path}, {"GET", path + "?x=1"}} {
			if !skipped[must] {
				t.Errorf("%s %s was limited: the carve-out does not work", must.Method, must.Target)
			}
		}
		for _, pr := range []Probe{{"POST", path}, {"GET", strings.ToUpper(path)}, {"GET", path + ";x"}, {"GET", path + "/../api"}} {
			if skipped[pr] {
				t.Errorf("%s %s was carved out; it must stay limited", pr.Method, pr.Target)
			}
		}
	}
	return skipped
}

func checkProbe(t *testing.T, where, path string, pr Probe, status int, servedBy string, skipped bool) {
	t.Helper()
	switch {
	case skipped && servedBy != path:
		t.Errorf("%s: %s %s skipped the limiter but was served by %q (status %d), not by %s's handler", where, pr.Method, pr.Target, servedBy, status, path)
	case !skipped && servedBy != "" && status != http.StatusTooManyRequests:
		t.Errorf("%s: %s %s was served by %q (status %d) with the limit exhausted", where, pr.Method, pr.Target, servedBy, status)
	}
}

type recorded struct {
	*httptest.ResponseRecorder
	skipped bool
}

// inProcess serves pr through h with a request parsed from the raw request
// line; ok is false when net/http would reject the line.
func (p *CarveOutProber) inProcess(h http.Handler, pr Probe) (recorded, bool) {
	r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(pr.Method + " " + pr.Target + " HTTP/1.1\r\nHost: example.com\r\n\r\n")))
	if err != nil {
		return recorded{}, false
	}
	r.RemoteAddr = "192.0.2.1:1234"
	before := p.skipped.Load()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return recorded{w, p.skipped.Load() != before}, true
}

// live writes pr's request line on a new connection to addr.
func (p *CarveOutProber) live(t *testing.T, addr string, pr Probe) (*http.Response, bool) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(time.Minute))
	before := p.skipped.Load()
	if _, err := conn.Write([]byte(pr.Method + " " + pr.Target + " HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: pr.Method})
	if err != nil {
		t.Fatalf("live: %s %s: %v", pr.Method, pr.Target, err)
	}
	resp.Body.Close()
	// The server observed the request before it wrote the response.
	return resp, p.skipped.Load() != before
}
