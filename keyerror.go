package ratelimit

import (
	"encoding/json"
	"errors"
	"fmt"
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

// OnKeyError sets the key-error policy of every rule of the Limiter; a 400
// unless set. It panics on a Status that is not 0 or a 4xx or 5xx, and on
// a Status with Shared.
func OnKeyError(p KeyErrorPolicy) Option {
	if p.Status != 0 && (p.Status < 400 || p.Status > 599) {
		panic(fmt.Sprintf("ratelimit: OnKeyError: Status %d: use a 4xx or 5xx status", p.Status))
	}
	if p.Shared && p.Status != 0 {
		panic(fmt.Sprintf("ratelimit: OnKeyError: Status %d with Shared: a shared bucket rejects no request", p.Status))
	}
	return func(c *config) { c.onKeyError = p }
}

// writeKeyProblem answers a request that ru's key function failed on.
func writeKeyProblem(w http.ResponseWriter, ru *rule, err error) {
	body := ru.keyProblem
	if b := keyProblemDetail(ru.onKeyError.rejectStatus(), err); b != nil {
		body = b
	}
	problem.WriteBody(w, ru.onKeyError.rejectStatus(), body)
}

// keyError is a key function's error with a detail for the problem body.
type keyError struct {
	err    error
	detail string
}

func (e *keyError) Error() string { return e.err.Error() + ": " + e.detail }
func (e *keyError) Unwrap() error { return e.err }

// keyProblemDetail returns the problem body for a key error that carries a
// detail of its own, or nil.
func keyProblemDetail(status int, err error) []byte {
	var ke *keyError
	if !errors.As(err, &ke) {
		return nil
	}
	b, _ := json.Marshal(struct {
		Type   string `json:"type"`
		Title  string `json:"title"`
		Status int    `json:"status"`
		Detail string `json:"detail"`
	}{"about:blank", http.StatusText(status), status, ke.detail})
	return append(b, '\n')
}
