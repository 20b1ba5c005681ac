package ratelimitclient

import (
	"fmt"
	"io"
	"net/http"
)

// replayable reports whether req may be sent again after a throttle: its
// method is idempotent, or it carries an Idempotency-Key, and its body can
// be rewound.
func replayable(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
	default:
		if len(req.Header["Idempotency-Key"]) == 0 {
			return false
		}
	}
	return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
}

// rewind returns the request to send for attempt: req itself the first
// time, a copy with a fresh body from GetBody after that.
func rewind(req *http.Request, attempt int) (*http.Request, error) {
	if attempt == 0 || req.Body == nil || req.Body == http.NoBody {
		return req, nil
	}
	body, err := req.GetBody()
	if err != nil {
		return nil, fmt.Errorf("ratelimit: rewinding the body for a retry: %w", err)
	}
	r := *req
	r.Body = body
	return &r, nil
}

// discard reads a little of a response that is not returned, so that its
// connection can be reused, and closes it.
func discard(resp *http.Response) {
	_, _ = io.CopyN(io.Discard, resp.Body, 4<<10)
	_ = resp.Body.Close()
}

// closeBody closes the body of a request that is not sent, as RoundTrip
// must.
func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}
