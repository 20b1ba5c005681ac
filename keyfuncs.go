package ratelimit

import "net/http"

// KeyFunc extracts the key a request is limited by, such as its client IP.
//
// It returns an error wrapping ErrNoKey when the request carries no usable
// key; the rule's key-error policy then decides the outcome (see OnKeyError).
// A KeyFunc must be safe for concurrent use.
type KeyFunc func(r *http.Request) (string, error)
