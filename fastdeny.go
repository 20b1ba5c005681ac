package ratelimit

import (
	"net/http"
	"strconv"
)

// denyFields are the field values of a denial with a given delay t: the
// same for every denial under the rule within that second, so they are
// built once and shared by every such response, which then costs no
// allocation.
//
// A shared value must not change under another response. Each field gets
// a slice of length and capacity 1, so appending to it (Header.Add) copies;
// Header.Set and Header.Del replace or drop the slice. Only an assignment
// into the slice (h[k][0] = v) would reach the shared array, which no
// net/http code does; set checks the values against their pristine copies
// before each use and rebuilds them if one was changed, so such an edit
// never outlives the responses that were being written at that moment.
type denyFields struct {
	t      int64
	vals   [5]string // policy, RateLimit, Retry-After, Cache-Control, Content-Type
	intact [5]string // what vals must hold
	_      [24]byte  // whole cache lines: see TestHotStateFillsWholeCacheLines
}

// denial returns the shared fields of a denial with delay t, building them
// when none are cached for t or the cached ones were edited.
func (f *fastRule) denial(t int64) *denyFields {
	slot := &f.denials[t&(int64(len(f.denials))-1)]
	if d := slot.Load(); d != nil && d.t == t && d.vals == d.intact {
		return d
	}
	d := &denyFields{t: t}
	value := f.quoted + ";r=0;t=" + strconv.FormatInt(t, 10)
	if f.slots {
		value = f.quoted + ";r=0" // see noDelay
	}
	d.intact = [5]string{
		f.policy,
		value,
		strconv.FormatInt(max(1, t), 10),
		"no-store",
		"application/problem+json",
	}
	d.vals = d.intact
	slot.Store(d)
	return d
}

func (d *denyFields) set(h http.Header) {
	h[hdrPolicy] = d.vals[0:1:1]
	h[hdrRateLimit] = d.vals[1:2:2]
	h[hdrRetryAfter] = d.vals[2:3:3]
	h[hdrCacheControl] = d.vals[3:4:4]
	h[hdrContentType] = d.vals[4:5:5]
}
