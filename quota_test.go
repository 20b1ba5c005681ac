package ratelimit_test

import (
	"errors"
	"testing"

	"github.com/sluicehq/ratelimit"
)

// TestQuotaValidateRejectsWhatNoStoreCanCount: Validate accepts the quotas
// Daily, Weekly and Monthly make of 1 to 2^31-1 events, and refuses, with
// an error wrapping ErrInvalidLimit, the zero Quota and counts no store
// can enforce.
func TestQuotaValidateRejectsWhatNoStoreCanCount(t *testing.T) {
	for _, q := range []ratelimit.Quota{ratelimit.Daily(1, nil), ratelimit.Weekly(1<<31-1, nil), ratelimit.Monthly(1000, nil)} {
		if err := q.Validate(); err != nil {
			t.Errorf("%+v: %v", q, err)
		}
	}
	for name, q := range map[string]ratelimit.Quota{
		"zero":     {},
		"empty":    ratelimit.Daily(0, nil),
		"negative": ratelimit.Weekly(-1, nil),
		"too many": ratelimit.Monthly(1<<31, nil),
	} {
		if err := q.Validate(); !errors.Is(err, ratelimit.ErrInvalidLimit) {
			t.Errorf("%s: Validate() = %v, want an error wrapping ErrInvalidLimit", name, err)
		}
	}
}
