// Package adaptive is an adaptive concurrency limit: a cap on requests in
// flight that follows the latency of the requests it admits, so that it is
// too low neither in good times nor too high when a dependency slows down.
//
// Most users set a Config on a rule, and the middleware of package ratelimit
// applies it (503 with Retry-After when the limit is reached):
//
//	ratelimit.Rule{Name: "inflight", Key: ratelimit.Global(), Adaptive: &adaptive.Config{Max: 500}}
//
// gRPC services get it through the interceptors of the adapters/grpc
// module. A Limiter is the same controller for other callers (a queue
// consumer): Acquire a Ticket, Release it with the request's Sample, a
// drop only for what your code decided (its own timeout), never for a
// deadline the work arrived with. The docs/adaptive.md page of the
// repository has the algorithm, the figures and when not to use it.
package adaptive
