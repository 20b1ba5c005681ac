package ratelimit

import "github.com/sluicehq/ratelimit/internal/problem"

// ProblemType is the RFC 9457 problem type of a denied request, registered
// by draft-ietf-httpapi-ratelimit-headers.
const ProblemType = problem.QuotaExceeded

// failClosedType is the problem type of a fail-closed response, whichever
// status fail closed was given: temporary-reduced-capacity, which
// draft-ietf-httpapi-ratelimit-headers registers for requests that cannot
// be served for a temporary lack of capacity, here the limiter's. Not
// quota-exceeded: the request exceeded no quota, so the body names no
// violated policies.
const failClosedType = problem.ReducedCapacity
