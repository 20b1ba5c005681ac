// Package ratelimitclient is the client side of HTTP rate limiting: an
// http.RoundTripper that keeps requests within the limits servers announce
// and waits out the throttles they impose, so that a client of a
// rate-limited API neither bursts into 429s nor retries into a storm.
//
// Wrap a client's transport:
//
//	client := &http.Client{Transport: &ratelimitclient.Transport{}}
//
// The Transport reads, from every response:
//
//   - RateLimit and RateLimit-Policy, the fields of
//     draft-ietf-httpapi-ratelimit-headers (RateLimit: "default";r=42;t=17,
//     RateLimit-Policy: "default";q=100;w=60), one state per policy name;
//   - the forms of earlier drafts: RateLimit-Limit, RateLimit-Remaining and
//     RateLimit-Reset, or RateLimit: limit=100, remaining=42, reset=17;
//   - the de-facto X-RateLimit-Limit, X-RateLimit-Remaining and
//     X-RateLimit-Reset, whose reset is taken as a Unix time (seconds or
//     milliseconds, read on the server's clock as its Date fields bound it)
//     when it is large enough to be one and as seconds otherwise;
//     X-RateLimit-Resource (GitHub's) names the policy;
//   - Retry-After, in seconds or as an HTTP-date.
//
// Malformed fields are ignored, as are all fields of a response served from
// a cache (one with an Age field): they describe a past quota. Delays are
// capped by Transport.MaxDelay.
//
// Before sending, the Transport spreads the quota left over the time until
// it is restored, never slower than the policy's average rate when its quota
// and window are known; once it is spent it waits for the reset and then
// goes on at that rate. Resets sent in whole seconds are taken as the upper
// bounds they are, the earliest bound of a window kept. After a 429, or a
// 503 or 403 with Retry-After, the whole partition waits until Retry-After
// has passed; each request waiting for a throttle or a reset is paced from
// its end and delayed by its own jitter (but the first one paced from a
// reset), so that they do not all resume at once. Quota is never counted twice: responses to
// concurrent requests may arrive out of order, so each is applied only if it
// answers a later send than the last one applied, and the sends made since
// are deducted from what it reports.
//
// A request waits only while the wait fits both Transport.MaxWait and its
// context's deadline; otherwise RoundTrip fails at once, without a network
// call, with a *WaitError: errors.Is(err, ErrWouldWait) holds, and so does
// errors.Is(err, context.DeadlineExceeded) when the deadline was the bound.
// A context cancelled during a wait ends it with an error wrapping the
// context's error.
package ratelimitclient
