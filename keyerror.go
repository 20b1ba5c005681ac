package ratelimit

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/sluicehq/ratelimit/internal/problem"
)

// KeyErrorPolicy is what happens to a request whose key cannot be extracted
// (the KeyFunc returned an error): never a silent bypass. The zero value,
// the default, rejects the request with 400 Bad Request.
type KeyErrorPolicy struct {
	// Status is the status the request is rejected with, a 4xx or 5xx, with
	// an RFC 9457 problem body and without running the handler; 0 means 400
	// Bad Request, and 401 suits a rule keyed by an authenticated user.
	Status int

	// Shared counts every request without a key in one bucket per rule,
	// under the same limit, instead of rejecting it: anonymous traffic as a
	// whole is limited as one client would be. Status must then be 0.
	Shared bool
}

// rejectStatus is the status of a rejected request without a key.
func (p KeyErrorPolicy) rejectStatus() int {
	if p.Status == 0 {
		return http.StatusBadRequest
	}
	return p.Status
}

// writeKeyProblem answers with status a request whose key function failed
// with err: body, unless err carries a detail of its own.
func writeKeyProblem(w http.ResponseWriter, status int, body []byte, err error) {
	if b := keyProblemDetail(status, err); b != nil {
		body = b
	}
	problem.WriteBody(w, status, body)
}

// keyProblemDetail returns the problem body for a key error that carries a
// detail of its own (a ProblemDetail method: see KeyFunc), or nil.
func keyProblemDetail(status int, err error) []byte {
	var d interface{ ProblemDetail() string }
	if !errors.As(err, &d) {
		return nil
	}
	b, _ := json.Marshal(struct {
		Type   string `json:"type"`
		Title  string `json:"title"`
		Status int    `json:"status"`
		Detail string `json:"detail"`
	}{"about:blank", http.StatusText(status), status, d.ProblemDetail()})
	return append(b, '\n')
}
