package ratelimit

import "errors"

var (
	// ErrInvalidLimit is wrapped by errors about a Limit that cannot be enforced.
	ErrInvalidLimit = errors.New("ratelimit: invalid limit")

	// ErrInvalidRequest is wrapped by store errors about a malformed Request:
	// a negative or oversized cost, an unknown algorithm.
	ErrInvalidRequest = errors.New("ratelimit: invalid request")

	// ErrNoKey is wrapped by KeyFunc errors when a request carries no usable
	// key (no peer address, a missing header, an unauthenticated user). What
	// happens then is the rule's key-error policy; see OnKeyError.
	ErrNoKey = errors.New("ratelimit: no key")

	// ErrStoreUnavailable is wrapped by errors reported for a store that failed;
	// errors.Is(err, ErrStoreUnavailable) tells store failures from bad requests.
	ErrStoreUnavailable = errors.New("ratelimit: store unavailable")
)
