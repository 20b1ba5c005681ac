package envoy

import "sync/atomic"

// Stats counts what a Service did since it was created.
type Stats struct {
	Calls                int64 // ShouldRateLimit calls
	OverLimit            int64 // calls with at least one enforced descriptor over its limit (before global shadow mode)
	OverLimitDescriptors int64 // descriptors over their limit, shadow and quota mode included
	StoreErrors          int64 // descriptors the store could not decide
	Fallbacks            int64 // of those, decided by the fallback store
}

type counters struct {
	calls, overLimit, overLimitDescriptors, storeErrors, fallbacks atomic.Int64
}

// Stats returns the service's counters.
func (s *Service) Stats() Stats {
	c := &s.stats
	return Stats{
		Calls: c.calls.Load(), OverLimit: c.overLimit.Load(), OverLimitDescriptors: c.overLimitDescriptors.Load(),
		StoreErrors: c.storeErrors.Load(), Fallbacks: c.fallbacks.Load(),
	}
}
