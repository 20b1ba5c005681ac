// Package ratelimittest provides helpers for testing rate limits with
// net/http/httptest: a fake Clock; requests from chosen clients; helpers
// that find the first limited request and parse the RateLimit fields;
// CarveOutProber, which checks that carve-outs never let a request bypass
// the limit; TestStore, the conformance suite every ratelimit.Store must
// pass; and TestAdapter, the one every HTTP framework adapter must pass.
//
// Like httptest, its constructors panic rather than take a *testing.T, so
// they work in tests, benchmarks and examples alike.
package ratelimittest
