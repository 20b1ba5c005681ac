package ratelimit_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
)

// errStoreDown is the error of stores that tests take down.
var errStoreDown = errors.New("store down")

// serve serves r with h and returns the status and body, or what h panicked
// with.
func serve(h http.Handler, r *http.Request) (code int, body string, panicked any) {
	defer func() { panicked = recover() }()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec.Code, rec.Body.String(), nil
}
