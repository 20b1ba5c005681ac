package ratelimitclient

// capSpacing keeps the spacing of a policy whose quota and window are known
// (RateLimit-Policy's q and w) at most their average, w/q. apply spreads the
// sends left over the effective window, which under a window algorithm is
// the rest of the window: early in a window, with most of the quota spent,
// that spacing exceeds the policy's own rate (a PerMinute(6) fixed window
// with 3 sends left and 40 s to go spaces them 13 s apart), so a client
// sending at the policy's rate, never beyond any limit, was made to wait.
// Sends beyond the quota left still wait for it to be restored (take).
func (p *policy) capSpacing() {
	if p.known() {
		p.interval = min(p.interval, p.avg())
	}
}
