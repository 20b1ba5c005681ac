package ratelimitclient_test

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// fakeBase is a base RoundTripper that answers with respond and records
// every call.
type fakeBase struct {
	respond func(n int, req *http.Request) *http.Response

	mu     sync.Mutex
	calls  []time.Time
	hosts  []string
	bodies []string
}

func (f *fakeBase) RoundTrip(req *http.Request) (*http.Response, error) {
	body := ""
	if req.Body != nil {
		b, _ := io.ReadAll(req.Body)
		req.Body.Close()
		body = string(b)
	}
	f.mu.Lock()
	n := len(f.calls)
	f.calls = append(f.calls, time.Now())
	f.hosts = append(f.hosts, req.URL.Host)
	f.bodies = append(f.bodies, body)
	f.mu.Unlock()
	return f.respond(n, req), nil
}

func (f *fakeBase) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

func (f *fakeBase) callTimes() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.calls...)
}

// response builds a response with the given status and fields (name, value
// pairs).
func response(status int, fields ...string) *http.Response {
	h := http.Header{}
	for i := 0; i+1 < len(fields); i += 2 {
		h.Add(fields[i], fields[i+1])
	}
	return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader(""))}
}

func always(status int, fields ...string) func(int, *http.Request) *http.Response {
	return func(int, *http.Request) *http.Response { return response(status, fields...) }
}

func get(url string) *http.Request {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		panic(err)
	}
	return req
}

func send(tr http.RoundTripper, req *http.Request) (*http.Response, error) {
	resp, err := tr.RoundTrip(req)
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return resp, err
}
