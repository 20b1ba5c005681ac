// Package envoy serves Envoy's global rate limit protocol
// (envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit) from the
// configuration files of envoyproxy/ratelimit, on any ratelimit.Store: the
// Redis store (standalone, Cluster or Sentinel, with coalescing, the denied
// cache and the circuit breaker) or the memory store.
//
// Load or Watch reads the reference's YAML files unchanged (domains,
// nested descriptors with and without values, wildcards, rate_limit with
// unit, requests_per_unit, unlimited, name and replaces, shadow_mode,
// quota_mode, detailed_metric, value_to_metric, share_threshold), with
// every mistake reported at its line and column; Watch keeps the rules in
// step with the files, swapping them whole and keeping the old ones when a
// new file does not compile.
//
// A Service decides each request as the reference does where a gateway
// depends on it: every descriptor a limit applies to is charged its hits
// whether or not another is over, the overall code is OVER_LIMIT when any
// enforced descriptor is, and each status carries current_limit,
// limit_remaining and duration_until_reset. It counts with GCRA by
// default; WithReferenceWindows reproduces the reference's fixed windows
// exactly. The response asks Envoy to add the RateLimit, RateLimit-Policy
// and Retry-After fields the library's middleware writes. A FailurePolicy
// says what a descriptor gets when the store fails.
//
//	svc, err := envoy.New(nil, redisstore.New(client), envoy.WithFailurePolicy(envoy.FailClosed()))
//	w, err := envoy.Watch("/etc/ratelimit/config", svc, envoy.WatchOptions{})
//	svc.Register(grpcServer)
//
// The command envoy-ratelimit (cmd/envoy-ratelimit) runs it. See
// docs/envoy.md for Envoy's configuration and where decisions differ from
// the reference.
package envoy
