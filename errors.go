package ratelimit

import (
	"errors"
	"fmt"

	"github.com/sluicehq/ratelimit/stores"
)

var (
	// ErrInvalidLimit is wrapped by errors about a Limit that cannot be
	// enforced. It is stores.ErrInvalidLimit.
	ErrInvalidLimit = stores.ErrInvalidLimit

	// ErrInvalidRequest is wrapped by store errors about a malformed request:
	// a negative or oversized cost, an unknown algorithm. It is
	// stores.ErrInvalidRequest.
	ErrInvalidRequest = stores.ErrInvalidRequest

	// ErrNoKey is wrapped by KeyFunc errors when a request carries no usable
	// key (no peer address, a missing header, an unauthenticated user). What
	// happens then is the rule's key-error policy; see OnKeyError.
	ErrNoKey = errors.New("ratelimit: no key")

	// ErrStoreUnavailable is wrapped by errors reported for a store that failed;
	// errors.Is(err, ErrStoreUnavailable) tells store failures from bad requests.
	ErrStoreUnavailable = errors.New("ratelimit: store unavailable")

	// ErrUnknownRule is wrapped by Peek and Reset when the limiter has no
	// rule of the given name.
	ErrUnknownRule = errors.New("ratelimit: unknown rule")

	// ErrResetUnsupported is wrapped by Reset when the rule's store does not
	// implement Resetter.
	ErrResetUnsupported = errors.New("ratelimit: store cannot reset keys")
)

// ruleError wraps the error a store returned for rule: with
// ErrStoreUnavailable, unless the store rejected the request itself
// (ErrInvalidRequest, ErrInvalidLimit), which no store can answer
// differently and must not read as a store failure.
func ruleError(rule string, err error) error {
	if errors.Is(err, ErrInvalidRequest) || errors.Is(err, ErrInvalidLimit) {
		return fmt.Errorf("ratelimit: rule %q: %w", rule, err)
	}
	return fmt.Errorf("%w: rule %q: %w", ErrStoreUnavailable, rule, err)
}
