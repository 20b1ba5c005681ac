package stores

import "errors"

var (
	// ErrInvalidLimit is wrapped by errors about a Limit that cannot be enforced.
	ErrInvalidLimit = errors.New("ratelimit: invalid limit")

	// ErrInvalidRequest is wrapped by store errors about a malformed Request:
	// a negative or oversized cost, an unknown algorithm.
	ErrInvalidRequest = errors.New("ratelimit: invalid request")
)
