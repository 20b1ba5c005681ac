// Package fair shares a server's capacity fairly under overload: priority
// levels and fair queuing in front of the per-client rate limits of package
// ratelimit, in the manner of Kubernetes API Priority and Fairness.
//
// A Scheduler admits requests into a number of seats (the requests served
// at once). Levels share the seats by their shares, lend the ones they
// leave idle, and may keep a reserve; exempt levels (health checks) are
// never held back. Within a level, requests that find no seat wait in
// queues chosen by shuffle sharding of their flow key (a tenant, a user,
// a client IP: any ratelimit.KeyFunc) and are served in fair order, so a
// flow sending ten times its share waits behind itself. Waits are bounded
// by Config.MaxWait and the request's deadline; refusals are 429 (the
// flow's queue is full) or 503 (no seat in time) with a Retry-After.
//
//	cfg := fair.Preset(256, ratelimit.ByUser(userID)) // critical / interactive / batch / test
//	cfg.Classify = func(r *http.Request) string { return classes[r.URL.Path] }
//	handler := fair.New(cfg).Handler(limiter.Handler(mux))
//
// Framework adapters take a seat with Scheduler.Acquire and give it back
// with Seat.Release, which frees it once however often it is called.
//
// Every decision is reported to Config.Observer as an Event; the modules
// metrics/prometheus and metrics/otel export them.
package fair
