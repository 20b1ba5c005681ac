package ratelimittest

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// DefaultRemoteAddr is the peer address of requests made by NewRequest, the
// same documentation address httptest uses.
const DefaultRemoteAddr = "192.0.2.1:1234"

// NewRequest returns a request for target, as httptest.NewRequest does, that
// came from remoteAddr ("" means DefaultRemoteAddr). Header pairs are added
// in order: NewRequest("GET", "/", "", "X-Forwarded-For", "203.0.113.9").
// It panics on an odd number of header arguments.
func NewRequest(method, target, remoteAddr string, header ...string) *http.Request {
	if len(header)%2 != 0 {
		panic("ratelimittest: NewRequest needs header name/value pairs")
	}
	r := httptest.NewRequest(method, target, nil)
	if remoteAddr != "" {
		r.RemoteAddr = remoteAddr
	}
	for i := 0; i < len(header); i += 2 {
		r.Header.Add(header[i], header[i+1])
	}
	return r
}

// Response is what one request through a handler produced.
type Response struct {
	Code   int
	Header http.Header
	Body   string
}

// Limited reports whether the response is a 429 Too Many Requests.
func (r *Response) Limited() bool { return r.Code == http.StatusTooManyRequests }

// Do serves req with h and returns the response. The request's body, if any,
// is consumed.
func Do(h http.Handler, req *http.Request) *Response {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	body, _ := io.ReadAll(rec.Result().Body)
	return &Response{Code: rec.Code, Header: rec.Header(), Body: string(body)}
}

// Get serves a GET request for target from DefaultRemoteAddr with h and
// returns the response.
func Get(h http.Handler, target string) *Response {
	return Do(h, NewRequest(http.MethodGet, target, ""))
}

// FirstLimited sends up to max requests made by newReq through h and
// returns the 1-based index of the first 429 and its response, or 0 and nil
// if none was limited. Time does not move between requests unless newReq
// moves a Clock.
func FirstLimited(h http.Handler, max int, newReq func() *http.Request) (int, *Response) {
	for i := 1; i <= max; i++ {
		if resp := Do(h, newReq()); resp.Limited() {
			return i, resp
		}
	}
	return 0, nil
}

// RateLimit is a parsed RateLimit field: "name";r=remaining;t=seconds.
type RateLimit struct {
	Policy    string
	Remaining int
	Reset     time.Duration // t; zero when the member has none (a Concurrency rule's)
}

// ParseRateLimit parses the first member of the RateLimit field of h: the
// one policy a single limiter reports (with several rules, the most
// restrictive). Behind nested limiters, each adds its own member; read a
// given policy's with ParseRateLimitFor, or all of them with
// ParseRateLimits.
func ParseRateLimit(h http.Header) (RateLimit, error) {
	v := h.Get("RateLimit")
	if v == "" {
		return RateLimit{}, fmt.Errorf("ratelimittest: no RateLimit field")
	}
	first, _, _ := strings.Cut(v, ",")
	return parseRateLimit(strings.TrimSpace(first))
}

// ParseRateLimits parses every member of every RateLimit field line of h,
// in order.
func ParseRateLimits(h http.Header) ([]RateLimit, error) {
	var out []RateLimit
	for _, line := range h.Values("RateLimit") {
		for _, item := range strings.Split(line, ",") {
			rl, err := parseRateLimit(strings.TrimSpace(item))
			if err != nil {
				return nil, err
			}
			out = append(out, rl)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("ratelimittest: no RateLimit field")
	}
	return out, nil
}

// ParseRateLimitFor parses the RateLimit member of the policy named name,
// such as "login" or "ip-100-per-1m", wherever it is in the field. It
// fails if no member has that name.
func ParseRateLimitFor(h http.Header, name string) (RateLimit, error) {
	all, err := ParseRateLimits(h)
	if err != nil {
		return RateLimit{}, err
	}
	var names []string
	for _, rl := range all {
		if rl.Policy == name {
			return rl, nil
		}
		names = append(names, strconv.Quote(rl.Policy))
	}
	return RateLimit{}, fmt.Errorf("ratelimittest: no RateLimit member for policy %q (have %s)", name, strings.Join(names, ", "))
}

func parseRateLimit(v string) (RateLimit, error) {
	name, params, _, err := parseItem(v)
	if err != nil {
		return RateLimit{}, err
	}
	rl := RateLimit{Policy: name, Remaining: -1}
	for k, n := range params {
		switch k {
		case "r":
			rl.Remaining = n
		case "t":
			rl.Reset = time.Duration(n) * time.Second
		}
	}
	if rl.Remaining < 0 || rl.Reset < 0 {
		return RateLimit{}, fmt.Errorf("ratelimittest: RateLimit %q lacks r, or has a negative t", v)
	}
	return rl, nil
}

// Policy is one parsed member of the RateLimit-Policy field.
type Policy struct {
	Name   string
	Quota  int
	Window time.Duration // zero when the member has no w
	Unit   string        // the qu parameter, e.g. "concurrent-requests"; empty when absent
}

// ParsePolicies parses every member of the RateLimit-Policy field of h.
func ParsePolicies(h http.Header) ([]Policy, error) {
	var out []Policy
	for _, line := range h.Values("RateLimit-Policy") {
		for _, item := range strings.Split(line, ",") {
			name, params, unit, err := parseItem(strings.TrimSpace(item))
			if err != nil {
				return nil, err
			}
			out = append(out, Policy{Name: name, Quota: params["q"], Window: time.Duration(params["w"]) * time.Second, Unit: unit})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("ratelimittest: no RateLimit-Policy field")
	}
	return out, nil
}

// parseItem parses `"name";k=1;k2=2`, the subset of Structured Fields the
// limiter writes.
// Integer parameters go in params; the quota unit qu, a string, in unit.
func parseItem(v string) (name string, params map[string]int, unit string, err error) {
	parts := strings.Split(v, ";")
	name, err = strconv.Unquote(parts[0])
	if err != nil {
		return "", nil, "", fmt.Errorf("ratelimittest: bad item %q: %w", v, err)
	}
	params = make(map[string]int)
	for _, p := range parts[1:] {
		k, val, ok := strings.Cut(p, "=")
		if u, err := strconv.Unquote(val); ok && err == nil && k == "qu" {
			unit = u
			continue
		}
		n, err := strconv.Atoi(val)
		if !ok || err != nil {
			return "", nil, "", fmt.Errorf("ratelimittest: bad parameter %q in %q", p, v)
		}
		params[k] = n
	}
	return name, params, unit, nil
}

// ExpectLimitedAt sends requests made by newReq through h and fails tb
// unless the first n-1 are admitted and the n-th is limited (429). It
// returns the n-th response for further checks.
func ExpectLimitedAt(tb testing.TB, h http.Handler, n int, newReq func() *http.Request) *Response {
	tb.Helper()
	got, resp := FirstLimited(h, n, newReq)
	switch {
	case got == 0:
		tb.Fatalf("ratelimittest: none of %d requests was limited, want request %d to be", n, n)
	case got != n:
		tb.Fatalf("ratelimittest: request %d was limited, want request %d to be the first", got, n)
	}
	return resp
}
