package redisstore

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// The marker: while a key is split, its own Redis key holds a marker in
// place of its GCRA state, so that every Store sharing the prefix learns of
// the split on its next check of the key, and none admits from both the
// key and its parts. The marker is a GCRA state far in the future, which
// the main script reads as a denial with a RetryAfter of over 100 years:
// the sign a Store recognises (a denial it returns as such carries the
// marker's time left instead: markerDenial). It carries the number of parts, its phase
// and its expiry, in the time of the calls, so that server time and
// WithClock behave alike.
//
// The protocol, each step one atomic script on one key:
//
//   - Promote: (1) the main key gets the set-up marker, so nothing more is
//     admitted from it; (2) each part is emptied: tat = max(tat, now+tau)
//     for its own limit, so it admits only what refills from then on;
//     (3) the marker becomes active, with a TTL of 3 windows plus two
//     budgets. A Store uses the parts only from (3) on.
//   - Refresh: a Store that still finds the key hot sets the active
//     marker's TTL again once per window.
//   - Use: a Store uses the parts only until M (its budget) before the
//     marker's expiry as it last learned it (counted from before the call
//     that learned it, so never later than the real expiry). The key
//     itself outlives the expiry by the parts' refill time.
//   - Demote: a Store past that time runs the demotion on the main key: if
//     the marker still has more than M left, someone refreshed it and the
//     Store follows; otherwise the main key becomes an empty bucket whose
//     first unit comes M+interval later. Every Store stopped sending to
//     the parts M before, and a call sent lasts at most its budget, so no
//     part admits after the main key starts refilling.
//
// Units admitted in any span are then the main key's before the set-up
// marker, plus the parts' refill between their emptying and demotion, plus
// the main key's refill after demotion: never more than one key of the
// whole limit would admit. The price: the key is denied for the
// round trips of a promotion, and for up to M plus one interval after a
// demotion.

const (
	// A marker is markerBase + expiry×1000 + 10n + phase: expiry in ms on
	// the time scale of the calls (the server's TIME, or WithClock's), n
	// the parts, phase 0 while set up and 1 when active. Every marker lies
	// beyond markerBase, about the year 2191, and below 2^53.
	markerBase = 7_000_000_000_000_000
	// markerWait is the RetryAfter above which a denial is a marker: no
	// GCRA limit gives waits of 100 years.
	markerWait = 100 * 365 * 24 * time.Hour
	// maxSplitShards bounds Shards (and the n a marker may carry).
	maxSplitShards = 64
)

// markerScript runs one step of the protocol on the main key KEYS[1].
// ARGV: op, now µs or "", n, ttl ms, M ms, empty span µs (M + tau), extra
// TTL ms (how long the key outlives the marker's expiry).
//
// "p": set the set-up marker, expiring ttl from now; reply ttl.
// "a": activate the set-up marker of n, if it has not expired; "r":
// refresh an active marker; both reply ttl, or 0 when there is no live
// marker of the kind. "d": demote, when the active marker has M or less
// left (reply 0), or reply what it has left; -1 when there is no active
// marker of n (one of another n is not this Store's split: the Store drops
// its own and adopts that one). "u": undo a failed promotion: a set-up
// marker of n becomes the bucket a demotion leaves (reply 0); -1 when
// there is none. "g": reply {n, phase, ms left}, or {-1, 0, 0} if the key holds
// no marker. "e" empties the GCRA bucket KEYS[1], a part:
// tat = max(tat, now + ARGV[6]), its TTL ARGV[7] ms more than the time to
// full. Its clock, now, is clock.lua's, as the main script's is.
var markerScript = redis.NewScript(clockSource + `
local op = ARGV[1]
local base = 7000000000000000
local nowms = math.floor(now / 1000)
local n, ttl, m, extra = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[7])
local raw, v = redis.call("GET", KEYS[1]), nil
if raw then v = tonumber(string.match(raw, "^%-?%d+")) end -- a GCRA state is "<tat>:<interval>"
local vn, phase, left = -1, 0, 0
if v ~= nil and v >= base and v < 9007199254740992 then
  local r = v - base
  phase = r % 10
  vn = math.floor(r / 10) % 100
  left = math.floor(r / 1000) - nowms
end
local function mark(p)
  redis.call("SET", KEYS[1], string.format("%.0f", base + (nowms + ttl) * 1000 + 10 * n + p), "PX", string.format("%.0f", ttl + extra))
  return ttl
end
if op == "g" then return {vn, phase, left} end
if op == "e" then
  local tat = now + tonumber(ARGV[6])
  if v ~= nil and v > tat then tat = v end
  redis.call("SET", KEYS[1], string.format("%.0f", tat), "PX", string.format("%.0f", math.floor((tat - now + 999) / 1000) + extra))
  return 1
end
if op == "p" then return mark(0) end
if op == "a" then
  if vn ~= n or phase ~= 0 or left <= 0 then return 0 end
  return mark(1)
end
if op == "r" then
  if vn ~= n or phase ~= 1 or left <= 0 then return 0 end
  return mark(1)
end
if op == "u" then
  if vn ~= n or phase ~= 0 then return -1 end
elseif vn ~= n or phase ~= 1 then return -1
elseif left > m then return left end
local span = tonumber(ARGV[6])
redis.call("SET", KEYS[1], string.format("%.0f", now + span), "PX", string.format("%.0f", math.floor((span + 999) / 1000) + extra))
return 0
`)

// markerArgs returns the arguments of markerScript.
func (s *Store) markerArgs(op string, now instant, sp *splitKey) []any {
	var at any = ""
	slack := int64(0)
	if now.set {
		at, slack = now.us, ClockTTLSlack.Milliseconds()
	}
	// The key outlives the marker's expiry by the time the parts take to
	// refill (about the main key's tau) and M: a marker left to expire
	// finds the parts full, and the main key may start full.
	extra := (time.Duration(sp.tau)*time.Microsecond + s.timeout).Milliseconds() + 1 + slack
	if op == "p" {
		// The set-up marker's own life already covers the main key's
		// refill: once it expires the key may start full.
		extra = 1 + slack
	}
	return []any{op, at, sp.n, s.markerTTL(op, sp).Milliseconds(), s.timeout.Milliseconds(),
		s.timeout.Microseconds() + sp.tau, extra}
}

// markerTTL is the life of the set-up marker (long enough that the main
// key would have refilled when it expires: a failed promotion loses
// nothing) and of the active marker.
func (s *Store) markerTTL(op string, sp *splitKey) time.Duration {
	if op == "p" {
		return time.Duration(sp.tau)*time.Microsecond + 2*s.timeout
	}
	return 3*s.hotCfg().Window + 2*s.timeout
}

func (s *Store) runMarker(ctx context.Context, op string, now instant, sp *splitKey) (int64, error) {
	var n int64
	err := s.bounded(ctx, func() (err error) {
		n, err = markerScript.Run(ctx, s.client, []string{sp.main}, s.markerArgs(op, now, sp)...).Int64()
		return err
	})
	if err != nil {
		return 0, err // n is the call's goroutine's, which may yet write it
	}
	return n, nil
}

// readMarker returns the parts n of the main key's active marker and the
// time it has left; n is 0 when there is none (or it is being set up).
func (s *Store) readMarker(ctx context.Context, now instant, main string) (int, time.Duration, error) {
	var at any = ""
	if now.set {
		at = now.us
	}
	var vals []int64
	err := s.bounded(ctx, func() (err error) {
		vals, err = markerScript.Run(ctx, s.client, []string{main}, "g", at, 0, 0, 0, 0, 0).Int64Slice()
		return err
	})
	if err != nil || len(vals) != 3 || vals[1] != 1 || vals[0] < 2 || vals[2] <= 0 {
		return 0, 0, err
	}
	return int(vals[0]), time.Duration(vals[2]) * time.Millisecond, nil
}

func (s *Store) emptyPart(ctx context.Context, now instant, key string, tau int64) error {
	var at any = ""
	slack := int64(0)
	if now.set {
		at, slack = now.us, ClockTTLSlack.Milliseconds()
	}
	return s.bounded(ctx, func() error {
		return markerScript.Run(ctx, s.client, []string{key}, "e", at, 0, 0, 0, tau, slack).Err()
	})
}

// hotBudget is the context of a protocol step: the Store's budget, even
// when the caller's ctx ends (a step half done costs a denied key).
func (s *Store) hotBudget(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), s.timeout)
}
