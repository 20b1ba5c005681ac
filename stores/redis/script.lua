-- The rate-limit engine of package redisstore: every algorithm, one or many
-- requests, in one atomic call. A port of internal/memstore/algorithms.go
-- working in integer microseconds.
--
-- KEYS[i]  the state key of request i. On Cluster all keys share one slot.
--          When ARGV[4] is positive one more key follows the requests' keys:
--          the call key, which makes a repeated call (a client retrying
--          after a lost reply) return the first call's reply instead of
--          applying its requests again.
-- ARGV[1]  mode: "t" take all-or-nothing; "p" the same, and also reply for
--          each request with the cost-0 peek of its state as it was before
--          the call (for compensating a TakeAll across shards); "r" return
--          (refund) each request's cost; "i" independent requests, each
--          decided on its own in order, as if each were its own call (the
--          coalesced checks of many callers): a negative cost returns -cost
--          units, and algorithm 4 is a GCRA lease (see below).
-- ARGV[2]  now in Unix microseconds, or "" to read the server's TIME (see
--          clock.lua, the prelude that sets now).
-- ARGV[3]  extra TTL in milliseconds added to every write (0 with server time).
-- ARGV[4]  how long the call key keeps the reply, in milliseconds; 0: no call key.
-- ARGV[5+7(i-1)..] seven fields per request: algorithm (0 GCRA, 1 sliding
--          window, 2 fixed window, 3 concurrency, 5 sliding log; see
--          slidinglog.lua), rate, span in µs (the
--          period; for GCRA the interval, ceil(period/rate), which the
--          caller computes exactly), capacity, cost, a sixth field:
--          for a fixed window its explicit bounds in µs, "" for an
--          epoch-aligned window, "<end>", or "<prev>:<start>:<end>:<next>"
--          with the neighbours' outer bounds (0: unknown); for a
--          concurrency return the slot token (0: the soonest to expire);
--          for a sliding log return the take's token (0: the newest events);
--          for a GCRA return the token of the take it gives back ("" or
--          0: unknown, the units come off the latest take; see Holes);
--          and a seventh, "" for most requests, or "[!]<n>": "!" marks a
--          forced take (a settlement: consumed whether or not it fits,
--          mode "i" only), and n is, for GCRA, the most a reservation may
--          wait in µs (pacing), for the windows the end of the window a
--          forced take or a return applies to (0 or none: the current one).
--
-- Reply, modes "t", "p" and "i": five integers per request, allowed (1 or
-- 0), remaining, retry-after µs, reset-after µs and the token; mode "p"
-- adds three more, the peek's remaining, retry-after and reset-after. An
-- allowed GCRA take replies its delay (a reservation's) in place of
-- retry-after; other allowed takes reply 0 there, but a forced window take
-- replies its retry-after as it is. The token of a take of non-zero cost
-- that consumed (0 otherwise): for GCRA the key's time just after it (a
-- forced take's too), for a window the end of the window it counted in
-- (not for a forced take), for concurrency its first slot id. Mode "r"
-- replies 0. In mode "i" a return replies 0 0 0 0 0, a request whose key
-- holds another type of value replies -1 0 0 0 0 (the others still run),
-- and a lease replies the units granted in place of allowed.
--
-- A lease (algorithm 4, mode "i") is a GCRA take of cost units that, when
-- allowed, also takes up to rate-cost more units if they are available now,
-- so that the caller can spend them locally: the rate field carries the
-- most units to grant.
--
-- Time never goes back for a key. A request stamped before the window a key
-- holds counts against the stored (later) window: a fixed window keeps the
-- later end, a sliding window decides at the start of the stored window,
-- and GCRA keeps tat = max(tat, now). An explicit window given with its
-- neighbours is replaced by the neighbour that contains now, so instances
-- whose clocks disagree count against the window of the server's time.
--
-- State, one key per request, always written with a TTL in the same call:
--   GCRA            "<tat>:<t>[:<call>]"     the theoretical arrival time and
--                                            the interval it counts in (see
--                                            gcra_decode; a bare "<tat>", a
--                                            split marker's, counts in any),
--                                            and the call of plain.lua that
--                                            wrote it, which this ignores
--   sliding window  "<start>:<cur>:<prev>"   current window start and counts
--   fixed window    "<end>:<count>"          the window end and its count
--   GCRA holes      a hash beside a GCRA key, "<prefix>{<tag>}:h:<rule>":
--                   end -> units of the reservations given back while
--                   later ones waited (see Holes below)
--   concurrency     a sorted set: one member per slot in flight, its id
--                   (a take of cost c holds c consecutive ids, the first
--                   is its token), scored by its deadline
--
-- Lua numbers are doubles: every value here is an integer below 2^53 and
-- every product is kept below 2^53, or computed exactly by muldiv.

-- BEGIN ARITHMETIC (script_test.go runs this part on its own)
local floor = math.floor

-- Exact for integers |a| < 2^53, b >= 1: a correctly rounded quotient of
-- such integers never rounds up to the next integer.
local function idiv(a, b) return floor(a / b) end
local function mod(a, b) return a - floor(a / b) * b end
local function max(a, b) if a > b then return a end return b end
local function min(a, b) if a < b then return a end return b end

local L = 4194304 -- 2^22: a count (< 2^31) times a limb stays below 2^53

local function limbs(x)
  local x0 = x % L
  local y = (x - x0) / L
  local x1 = y % L
  return x0, x1, (y - x1) / L
end

-- a*b - q*c, exact when the true value is below 2^53 in magnitude (its sign
-- is right otherwise). Needs a <= 2^31, min(q, c) <= 2^31, b, c < 2^66.
local function submul(a, b, q, c)
  if q > c then q, c = c, q end
  local b0, b1, b2 = limbs(b)
  local c0, c1, c2 = limbs(c)
  return ((a * b2 - q * c2) * L + (a * b1 - q * c1)) * L + (a * b0 - q * c0)
end

-- floor(a*b/c) and the remainder, exactly, for a <= 2^31, b < 2^53, c >= 1,
-- a quotient below 2^53, and the quotient or c at most 2^31. The double
-- estimate is off by a unit or two at most; the exact remainder fixes it.
local function muldiv(a, b, c)
  local q = floor(a * b / c)
  for _ = 1, 8 do
    local r = submul(a, b, q, c)
    if r < 0 or r >= c then
      local step = floor(r / c)
      if step == 0 then step = (r < 0) and -1 or 1 end
      q = q + step
    else
      return q, r
    end
  end
  return error("ratelimit: muldiv did not converge")
end

local function muldivceil(a, b, c)
  local q, r = muldiv(a, b, c)
  if r > 0 then return q + 1 end
  return q
end
-- END ARITHMETIC

-- Each algorithm takes the decoded state (nil when absent) and returns the
-- new state, allowed, remaining, retry-after (for GCRA, the delay of an
-- allowed reservation; 0 for other allowed takes), reset-after, the
-- state's lifetime in µs from now (only used when the state is written),
-- and the token of a take of non-zero cost that consumed (0 otherwise).

-- GCRA times saturate at TAT_CEIL (2^52 µs, the year 2112), below every
-- split marker (MARKER, hotmarker.go): a forced debt never reaches one.
local TAT_CEIL = 4503599627370496
local MARKER = 7000000000000000

-- A request of cost n fits at allowAt = tat + n*t - tau: now when allowAt
-- <= now, as a reservation when allowAt <= now + wmax (consumed at once,
-- acting at allowAt: the delay replaces retry-after). A forced request
-- (force) is consumed whether or not it fits, and reports the state after
-- its debt: when the next unit fits. A marker is never reserved on or
-- charged: it denies.
local function gcra(tat, now, t, cap, cost, wmax, force)
  local tau = t * cap
  if tat == nil or tat < now then tat = now end
  if tat >= MARKER then wmax, force = 0, false end
  local wait = (tat - now - tau) + max(cost, 1) * t
  if wait > (wmax or 0) and not force then
    return nil, false, max(0, idiv(tau - (tat - now), t)), wait, tat - now, 0, 0
  end
  local nt = min(tat + cost * t, TAT_CEIL)
  local rem = max(0, idiv(tau - (nt - now), t))
  local token = 0
  if cost > 0 then token = nt end
  if force then
    if wait <= 0 then return nt, true, rem, 0, nt - now, nt - now, token end
    return nt, false, rem, nt + t - tau - now, nt - now, nt - now, token
  end
  return nt, true, rem, max(0, wait), nt - now, nt - now, token
end

local function sliding_reset(cur, prev, start, now, p)
  if cur > 0 then return (start - now) + 2 * p end
  if prev > 0 then return (start - now) + p end
  return 0
end

-- How long until need units fit: see slidingRetryAfter in memstore.
local function sliding_retry(cur, prev, need, start, now, rate, p)
  local free = rate - cur - need
  if free >= 0 and prev > 0 then
    if free >= prev then return 1 end -- unreachable when denied
    local e = p - muldiv(free, p, prev)
    if e < p then return max(start + e, now + 1) - now end
  end
  local e = 0
  if cur > 0 and rate - need < cur then
    e = max(0, p - muldiv(rate - need, p, cur))
  end
  return (start - now) + p + e
end

-- A request stamped before the stored window is decided at that window's
-- start (the least favourable instant of it), and its durations are then
-- counted from its own time: d is how far it was moved forward. An empty
-- state holds no window. sliding_state returns the time of decision, d,
-- the current window's start, and its and the previous window's counts.
local function sliding_state(st, at, p)
  local now = at
  if st and (st[2] > 0 or st[3] > 0) and st[1] > now then now = st[1] end
  local start = now - mod(now, p)
  local cur, prev = 0, 0
  if st then
    if st[1] == start then
      cur, prev = st[2], st[3]
    elseif st[1] == start - p then
      prev = st[2]
    end
  end
  return now, now - at, start, cur, prev
end

local function sliding(st, at, rate, p, cost)
  local now, d, start, cur, prev = sliding_state(st, at, p)
  local e = now - start
  local weighted = muldivceil(prev, p - e, p)
  local need = max(cost, 1)
  local reset
  if cur + need + weighted > rate then
    reset = sliding_reset(cur, prev, start, now, p)
    if reset > 0 then reset = reset + d end
    return nil, false, max(0, rate - cur - weighted),
      sliding_retry(cur, prev, need, start, now, rate, p) + d, reset, 0
  end
  cur = cur + cost
  reset = sliding_reset(cur, prev, start, now, p)
  if reset > 0 then reset = reset + d end
  local token = 0
  if cost > 0 then token = start + p end
  local left = rate - cur - weighted
  -- In place of retry-after, 0 when allowed: when more than left units
  -- fit (once left+1 do), the RateLimit field's t; see slidingRetryAfter.
  local nxt = sliding_retry(cur, prev, left + 1, start, now, rate, p) + d
  return {start, cur, prev}, true, left, nxt, reset, (start - now) + 2 * p + d, token
end

-- window_end returns the end of the fixed window of a request at now: the
-- epoch-aligned one, or the explicit one of spec (see the sixth field), or
-- the neighbour of it that contains now.
local function window_end(now, p, spec)
  if spec == nil or spec == "" then return now - mod(now, p) + p end
  local e = tonumber(spec)
  if e then return e end
  local a, s, b, c = string.match(spec, "^(%-?%d+):(%-?%d+):(%-?%d+):(%-?%d+)$")
  if not a then return error("ratelimit: bad window " .. spec) end
  a, s, b, c = tonumber(a), tonumber(s), tonumber(b), tonumber(c)
  if c ~= 0 and now >= b and now < c then return c end
  if a ~= 0 and now < s and now >= a then return s end
  return b
end

local function fixed(st, now, rate, p, cost, spec)
  local stop = window_end(now, p, spec)
  local count = 0
  if st and (st[1] == stop or st[2] > 0 and st[1] > stop) then stop, count = st[1], st[2] end -- never back
  local need = max(cost, 1)
  local left = max(0, stop - now) -- an explicit window may have ended
  if count + need > rate then
    return nil, false, max(0, rate - count), left, left, 0
  end
  count = count + cost
  local reset, token = 0, 0
  if count > 0 then reset = left end
  if cost > 0 then token = stop end
  return {stop, count}, true, rate - count, 0, reset, stop - now, token
end

-- Settlements: delta units (a forced take, or a return when negative) for
-- the window whose end is slot, or with slot 0 the window a take at now
-- counts in. A window that no longer counts (a fixed window that ended, a
-- sliding window before the previous one) is left alone (nil state).
-- Counts stay within [0, 2^31-1]. The reply is the target window's after
-- the change: allowed when within the limit.
local MAX_COUNT = 2147483647
local function clampc(x) return min(max(x, 0), MAX_COUNT) end

local function settle_fixed(st, now, rate, p, delta, spec, slot)
  local stop = slot
  if slot == 0 then
    stop = window_end(now, p, spec)
    if st and st[2] > 0 and st[1] > stop then stop = st[1] end -- never back
  elseif now >= stop or (st and st[2] > 0 and st[1] > stop) then
    local rem = rate
    if st and st[1] > now then rem = max(0, rate - st[2]) end
    return nil, true, rem, 0, 0, 0
  end
  local count = 0
  if st and st[1] == stop then count = st[2] end
  count = clampc(count + delta)
  local left = max(0, stop - now)
  if count > rate then return {stop, count}, false, 0, left, left, stop - now end
  return {stop, count}, true, rate - count, 0, left, stop - now
end

local function settle_sliding(st, at, rate, p, delta, slot)
  local now, d, start, cur, prev = sliding_state(st, at, p)
  local stop = slot
  if stop == 0 then stop = start + p end
  if stop < start or stop > start + p then -- before the previous window, or not yet
    local _, fits, rem, retry, reset = sliding(st, at, rate, p, 0)
    if fits then retry = 0 end -- not the time until more fit
    return nil, true, rem, retry, reset, 0
  end
  if stop == start + p then cur = clampc(cur + delta) else prev = clampc(prev + delta) end
  local weighted = muldivceil(prev, p - (now - start), p)
  local reset = sliding_reset(cur, prev, start, now, p)
  if reset > 0 then reset = reset + d end
  local retry = 0
  local ok = cur + weighted <= rate
  if not ok then retry = sliding_retry(cur, prev, 0, start, now, rate, p) + d end
  return {start, cur, prev}, ok, max(0, rate - cur - weighted), retry, reset, (start - now) + 2 * p + d
end

local function settle(alg, st, now, rate, p, delta, spec, slot)
  if alg == 1 then return settle_sliding(st, now, rate, p, delta, slot) end
  return settle_fixed(st, now, rate, p, delta, spec, slot)
end

-- settled is settle's new state and its lifetime only: a return.
local function settled(alg, st, now, rate, p, delta, spec, slot)
  local nst, _, _, _, _, life = settle(alg, st, now, rate, p, delta, spec, slot)
  return nst, life
end

-- extra decodes the seventh field: forced, and its number.
local function extra(x)
  if x == nil or x == "" then return false, 0 end
  if string.sub(x, 1, 1) == "!" then return true, tonumber(string.sub(x, 2)) or 0 end
  return false, tonumber(x) or 0
end

-- A GCRA time measures what a key used only in units of the interval it
-- was written with: a debt of tat-now is (tat-now)/t units. Read under a
-- shorter interval (a raised limit) the same time would owe more units than
-- the key took, and grant nothing; so the state keeps its interval, and a
-- request under a shorter one first re-expresses the debt in its own units
-- (rounded up): the new headroom is there at once. Under a longer interval
-- (a lowered limit) the debt stands as it is, the moment the bucket is full
-- again, and the state keeps the shorter interval, so that requests under
-- two limits in turn never move the debt back and forth (each move would
-- hand out the raise again). See internal/memstore/gcratags.go.
--
-- gcra_decode returns the time as a request under interval t reads it, and
-- the interval the state counts in from then on: the shorter of its own and
-- t while it owes anything, t once it does not (or for a state without an
-- interval: a split marker, or a bucket the split protocol wrote).
local function gcra_decode(v, t)
  if not v then return nil, t end
  local j = string.find(v, ":", 1, true)
  if not j then return tonumber(v), t end
  local tat = tonumber(string.sub(v, 1, j - 1))
  if not tat or tat <= now or tat >= MARKER then return tat, t end -- nothing owed: t's
  local k = string.find(v, ":", j + 1, true) -- plain.lua's ":<call>"
  local from = tonumber(string.sub(v, j + 1, (k or 0) - 1))
  if not from then return nil, t end
  if t >= from then return tat, from end
  local debt = tat - now
  local q = idiv(debt, from)
  local r = debt - q * from
  local part
  if t <= 2147483648 then
    part = muldivceil(t, r, from) -- exact
  else
    part = math.ceil(r / from * t) -- units of 35 minutes or more: to the µs
  end
  return now + q * t + part, t
end

local function decode(alg, v, t)
  if not v then return nil end
  if alg == 0 then return gcra_decode(v, t) end
  local a, b, c = string.match(v, "^(%-?%d+):(%d+):?(%d*)$")
  if not a then return nil end
  return {tonumber(a), tonumber(b), tonumber(c) or 0}
end

local function int(x) return string.format("%.0f", x) end

local function encode(alg, st, t)
  if alg == 0 then return int(st) .. ":" .. int(t) end
  if alg == 1 then return int(st[1]) .. ":" .. int(st[2]) .. ":" .. int(st[3]) end
  return int(st[1]) .. ":" .. int(st[2])
end

local mode = ARGV[1]
-- now, the time of the call in Unix microseconds, comes from clock.lua,
-- which script.go puts before this file.
local slack = tonumber(ARGV[3])
local keep = tonumber(ARGV[4])
local n = #KEYS
local callkey
if keep > 0 then
  n = n - 1
  callkey = KEYS[n + 1]
  local done = redis.call("GET", callkey)
  if done then
    -- A repeat of a call that already ran: its reply, nothing applied.
    if done == "r" then return 0 end
    local out = {}
    for v in string.gmatch(done, "[^,]+") do out[#out + 1] = tonumber(v) end
    return out
  end
end

-- finish records the reply under the call key, and returns it.
local function finish(out)
  if callkey then
    local v = "r"
    if type(out) == "table" then
      local s = {}
      for i = 1, #out do s[i] = int(out[i]) end
      v = table.concat(s, ",")
    end
    redis.call("SET", callkey, v, "PX", int(keep))
  end
  return out
end

-- Holes. A GCRA reservation given back while later ones wait cannot move
-- the key's time back: the freed turn would go to a newcomer while the
-- reservation behind it still holds the turn it was promised. Its turn is
-- kept as a hole instead: a field of a hash beside the key (same hash tag,
-- "h" in place of the algorithm code), its end (the key's time just after
-- the take, the take's token) mapped to its units in µs. When every
-- reservation after it has been given back, the time moves back through
-- it; once one after it has been served it is a lost turn, and it lapses
-- when its end passes. While a key has holes, token refunds follow this
-- rule even when nobody waits. See internal/memstore/gcraholes.go.
local MAX_HOLES = 4096 -- per key; beyond it a refund is lost (denies more)

local function holes_key(k)
  local j = string.find(k, "}", 1, true) -- the end of the hash tag
  return string.sub(k, 1, j) .. ":h" .. string.sub(k, j + 3)
end

-- add_hole records the hole ending at slot of units µs, unless one ends
-- there already, and keeps the hash at least as long as the key (whose
-- time is tat) and the hole.
local function add_hole(hk, slot, units, tat)
  if slot <= now then return end -- its turn has passed
  local n = redis.call("HLEN", hk)
  if n >= MAX_HOLES then -- drop the holes that ended: their turns passed
    local gone = {}
    for _, e in ipairs(redis.call("HKEYS", hk)) do
      if tonumber(e) <= now then gone[#gone + 1] = e end
    end
    for i = 1, #gone, 500 do redis.call("HDEL", hk, unpack(gone, i, min(#gone, i + 499))) end
    if n - #gone >= MAX_HOLES then return end
  end
  if redis.call("HSETNX", hk, int(slot), int(units)) == 0 then return end
  local ms = max(redis.call("PTTL", hk), idiv(max(tat, slot) - now + 999, 1000) + slack)
  redis.call("PEXPIRE", hk, int(max(1, ms)))
end

-- Refunds: the new state and its lifetime, or nil to leave the key alone,
-- or false to delete it. A GCRA refund of cost units of the take whose
-- token is slot (0: unknown) on key k at tat, for tau = t*cap: a hole
-- when it is not the latest and later reservations wait or the key has
-- holes; otherwise the time moves back by its units, then through the
-- holes that end there.
local function gcra_refund(k, tat, t, cap, cost, slot)
  -- A split key's marker (hotmarker.go) is no GCRA state: a refund that
  -- reaches it is dropped, never written into it.
  if tat >= MARKER then return nil end
  local tau, units = t * cap, cost * t
  local hk = holes_key(k)
  local n = redis.call("HLEN", hk)
  if n > 0 then -- the holes that have passed lapse
    local gone = {}
    for _, e in ipairs(redis.call("HKEYS", hk)) do
      if tonumber(e) <= now then gone[#gone + 1] = e end
    end
    for i = 1, #gone, 500 do redis.call("HDEL", hk, unpack(gone, i, min(#gone, i + 499))) end
    n = n - #gone
  end
  if slot ~= 0 and slot ~= tat and (tat > now + tau or n > 0) then
    add_hole(hk, slot, units, tat)
    return nil
  end
  tat = max(now, tat - units)
  while n > 0 and tat > now do
    local u = redis.call("HGET", hk, int(tat))
    if not u then break end
    redis.call("HDEL", hk, int(tat))
    n, tat = n - 1, max(now, tat - tonumber(u))
  end
  if tat <= now then return false, 0 end
  return tat, tat - now
end

-- Concurrency. A key is a sorted set of the slots in flight, scored by
-- their deadlines: each slot expires on its own. slots_load drops the
-- expired ones and returns the state {n, last, next} (slots in flight, the
-- latest deadline, the next free id if known); it returns nil when the key
-- holds another type of value.
local CONCURRENCY_RETRY_HINT = 1000000 -- 1s, as in memstore

local function slots_load(k)
  local r = redis.pcall("ZREMRANGEBYSCORE", k, "-inf", int(now))
  if type(r) == "table" and r.err then return nil end
  local st = {n = redis.call("ZCARD", k), last = now, adds = {}}
  if st.n > 0 then
    local top = redis.call("ZRANGE", k, -1, -1, "WITHSCORES")
    st.last = max(now, tonumber(top[2]))
    st.next = max(now, tonumber(top[1]) + 1)
  end
  return st
end

-- slot_id returns the first of cost consecutive ids that no live slot
-- holds. Ids follow the time they are taken at, so that a token whose
-- slots expired never names a later take's slots.
local function slot_id(k, st, cost)
  local id = st.next or max(now, 1)
  for j = 0, cost - 1 do
    if redis.call("ZSCORE", k, int(id + j)) then
      for _, m in ipairs(redis.call("ZRANGE", k, 0, -1)) do id = max(id, tonumber(m) + 1) end
      break
    end
  end
  return id
end

-- slots_take decides a take of cost slots against st and, when allowed,
-- records it in st.adds (slots_write adds it to the set). It returns the
-- new state, allowed, remaining, retry-after, reset-after and the token (0
-- unless it took slots).
local function slots_take(k, st, rate, p, cost)
  local need = max(cost, 1)
  if st.n + need > rate then
    local at = now + p
    local r = redis.call("ZRANGE", k, st.n + need - rate - 1, st.n + need - rate - 1, "WITHSCORES")
    if r[2] then at = tonumber(r[2]) end
    return st, false, max(0, rate - st.n), min(CONCURRENCY_RETRY_HINT, at - now), st.last - now, 0
  end
  if cost == 0 then return st, true, rate - st.n, 0, st.last - now, 0 end
  local id = slot_id(k, st, cost)
  local adds = {}
  for i, a in ipairs(st.adds) do adds[i] = a end
  adds[#adds + 1] = {id, cost, now + p}
  local nst = {n = st.n + cost, last = max(st.last, now + p), next = id + cost, adds = adds}
  return nst, true, rate - nst.n, 0, nst.last - now, id
end

local function zadd(k, from, count, score)
  local s = int(score)
  local i = 0
  while i < count do
    local args = {}
    for j = i, min(count, i + 500) - 1 do
      args[#args + 1] = s
      args[#args + 1] = int(from + j)
    end
    redis.call("ZADD", k, unpack(args))
    i = i + 500
  end
end

local function slots_write(k, st)
  for _, a in ipairs(st.adds) do zadd(k, a[1], a[2], a[3]) end
  if #st.adds > 0 then
    redis.call("PEXPIRE", k, int(max(1, idiv(st.last - now + 999, 1000)) + slack))
  end
  st.adds = {}
end

-- slots_return releases cost slots: those of token slot (ids slot to
-- slot+cost-1) or, for token 0, the cost slots that expire soonest.
local function slots_return(k, cost, slot)
  if not slots_load(k) then return false end
  local ids
  if slot > 0 then
    ids = {}
    for j = 0, cost - 1 do ids[#ids + 1] = int(slot + j) end
  else
    ids = redis.call("ZRANGE", k, 0, cost - 1)
  end
  local i = 1
  while i <= #ids do
    redis.call("ZREM", k, unpack(ids, i, min(#ids, i + 499)))
    i = i + 500
  end
  return true
end

-- take_gcra is a whole GCRA take of cost units on key k, whose stored value
-- is v (false when absent), with the seventh field x, without the tables
-- of the general case below: the fast path of the most common checks. It
-- returns allowed (1 or 0), remaining, retry-after (or delay),
-- reset-after and the token, and writes the new state when it consumed.
local function take_gcra(k, v, t, cap, cost, x)
  local force, wmax = extra(x)
  local st, within = gcra_decode(v, t)
  local tat, ok, rem, retry, reset, _, token = gcra(st, now, t, cap, cost, wmax, force)
  if tat and cost > 0 then
    local ms = floor((tat - now + 999) / 1000)
    if ms < 1 then ms = 1 end
    redis.call("SET", k, string.format("%.0f:%.0f", tat, within), "PX", string.format("%.0f", ms + slack))
  end
  return ok and 1 or 0, rem, retry, reset, token
end

-- Fast path: one GCRA take, the most common call.
if n == 1 and ARGV[5] == "0" and (mode == "t" or mode == "i") then
  local t, cap, cost = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
  if cost >= 0 then
    return finish({take_gcra(KEYS[1], redis.call("GET", KEYS[1]), t, cap, cost, ARGV[11])})
  end
end

-- W is the reply's width per request; reply writes request b/W+1's.
local W = 5
local function reply(out, b, code, rem, retry, reset, token)
  out[b + 1], out[b + 2], out[b + 3], out[b + 4], out[b + 5] = code, rem, retry, reset, token or 0
end

local cache, orig, within = {}, {}, {} -- within: a GCRA state's interval
local function load(i, alg, t)
  local k = KEYS[i]
  local s = cache[k]
  if s == nil then
    if alg == 3 or alg == 5 then
      if alg == 3 then s = slots_load(k) else s = log_load(k) end
      if not s then return error("WRONGTYPE " .. k .. " holds another type of value") end
    else
      local w
      s, w = decode(alg, redis.call("GET", k), t)
      s, within[k] = s or false, w
    end
    cache[k], orig[k] = s, s
  end
  return s or nil
end

local function apply(k, alg, st, rate, p, cap, cost, spec, x, force)
  if alg == 0 then return gcra(st, now, p, cap, cost, x, force) end
  if alg == 5 then
    local nst, ok, rem, retry, reset, token = log_take(k, st, rate, p, cost, force)
    return nst, ok, rem, retry, reset, 0, token
  end
  if force and alg ~= 3 then
    local nst, ok, rem, retry, reset, lifetime = settle(alg, st, now, rate, p, cost, spec, x)
    return nst, ok, rem, retry, reset, lifetime, 0
  end
  if alg == 1 then return sliding(st, now, rate, p, cost) end
  if alg == 2 then return fixed(st, now, rate, p, cost, spec) end
  local nst, ok, rem, retry, reset, token = slots_take(k, st, rate, p, cost)
  return nst, ok, rem, retry, reset, 0, token
end

local dirty, life, algs, spans, order = {}, {}, {}, {}, {}
local function mark(k, alg, st, lifetime, p)
  if not dirty[k] then order[#order + 1] = k end
  cache[k], dirty[k], life[k], algs[k], spans[k] = st, true, lifetime, alg, min(within[k] or p, p)
end

local function commit()
  for _, k in ipairs(order) do
    local st = cache[k]
    if algs[k] == 3 then
      slots_write(k, st)
    elseif algs[k] == 5 then
      log_write(k, st, slack)
    elseif st then
      local ms = max(1, idiv(life[k] + 999, 1000)) + slack
      redis.call("SET", k, encode(algs[k], st, spans[k]), "PX", int(ms))
    else
      redis.call("DEL", k)
    end
  end
end

local function field(i, j) return ARGV[4 + 7 * (i - 1) + j] end

-- one runs request i of mode "i" into out.
local function one(out, i)
  local b = W * (i - 1)
  local k = KEYS[i]
  local alg = tonumber(field(i, 1))
  local rate, p, cap = tonumber(field(i, 2)), tonumber(field(i, 3)), tonumber(field(i, 4))
  local cost, spec = tonumber(field(i, 5)), field(i, 6)
  local force, x = extra(field(i, 7))
  if alg == 3 then
    -- Applied at once: the set is the state.
    local ok = true
    if cost < 0 then
      ok = slots_return(k, -cost, tonumber(spec) or 0)
      reply(out, b, 0, 0, 0, 0, 0)
    else
      local st = slots_load(k)
      ok = st ~= nil
      if ok then
        local nst, allowed, rem, retry, reset, token = slots_take(k, st, rate, p, cost)
        slots_write(k, nst)
        reply(out, b, allowed and 1 or 0, rem, retry, reset, token)
      end
    end
    if not ok then reply(out, b, -1, 0, 0, 0, 0) end
    return
  end
  if alg == 5 then
    -- Applied at once, as concurrency: the set is the state.
    local st
    if cost < 0 then
      st = log_return(k, -cost, tonumber(spec) or 0)
      reply(out, b, 0, 0, 0, 0, 0)
    else
      st = log_load(k)
      if st then
        local nst, allowed, rem, retry, reset, token = log_take(k, st, rate, p, cost, force)
        log_write(k, nst, slack)
        reply(out, b, allowed and 1 or 0, rem, retry, reset, token)
      end
    end
    if not st then reply(out, b, -1, 0, 0, 0, 0) end
    return
  end
  local lease = alg == 4
  if lease then alg = 0 end
  local st = cache[k]
  if st == nil then
    local v = redis.pcall("GET", k)
    if type(v) == "table" and v.err then
      st = nil -- another type: this request fails, the others go on
    else
      local w
      st, w = decode(alg, v, p)
      st, within[k] = st or false, w
      cache[k] = st
    end
  end
  if st == nil then
    reply(out, b, -1, 0, 0, 0, 0)
  elseif cost < 0 then
    if st then
      local nst, lifetime
      if alg == 0 then
        nst, lifetime = gcra_refund(k, st, p, cap, -cost, tonumber(spec) or 0)
      else
        nst, lifetime = settled(alg, st, now, rate, p, cost, spec, x)
      end
      if nst ~= nil then mark(k, alg, nst, lifetime, p) end
    end
    reply(out, b, 0, 0, 0, 0, 0)
  else
    local nst, ok, rem, retry, reset, lifetime, token = apply(k, alg, st or nil, rate, p, cap, cost, spec, x, force)
    local code = ok and 1 or 0
    if ok and lease then
      -- Grant up to rate units in all: the cost, and whatever else fits.
      local extra = min(rate - cost, rem)
      if extra > 0 then
        nst = nst + extra * p
        rem, reset, lifetime = rem - extra, nst - now, nst - now
      end
      code, token = cost + max(extra, 0), nst
    end
    if nst ~= nil and (ok and code > 0 and (cost > 0 or lease) or force and cost > 0) then
      mark(k, alg, nst, lifetime, p)
    end
    reply(out, b, code, rem, retry, reset, token)
  end
end

if mode == "i" then
  local out = {}
  -- GCRA checks of keys named once in the batch (the usual case across many
  -- clients) take the fast path: no state tables.
  local count = {}
  for i = 1, n do
    local k = KEYS[i]
    count[k] = (count[k] or 0) + 1
  end
  for i = 1, n do
    local b = W * (i - 1)
    local k = KEYS[i]
    local cost = tonumber(field(i, 5))
    if field(i, 1) == "0" and cost >= 0 and count[k] == 1 then
      local v = redis.pcall("GET", k)
      if type(v) == "table" then
        reply(out, b, -1, 0, 0, 0, 0)
      else
        reply(out, b, take_gcra(k, v, tonumber(field(i, 3)), tonumber(field(i, 4)), cost, field(i, 7)))
      end
    else
      one(out, i)
    end
  end
  commit()
  return finish(out)
end

if mode == "r" then
  for i = 1, n do
    local alg = tonumber(field(i, 1))
    local rate, p, cap = tonumber(field(i, 2)), tonumber(field(i, 3)), tonumber(field(i, 4))
    local cost, spec = tonumber(field(i, 5)), field(i, 6)
    if alg == 3 or alg == 5 then
      local ret = slots_return
      if alg == 5 then ret = log_return end
      if not ret(KEYS[i], cost, tonumber(spec) or 0) then
        return error("WRONGTYPE " .. KEYS[i] .. " holds another type of value")
      end
    else
      local st = load(i, alg, p)
      if st then
        local nst, lifetime
        if alg == 0 then
          nst, lifetime = gcra_refund(KEYS[i], st, p, cap, cost, tonumber(spec) or 0)
        else
          local _, x = extra(field(i, 7))
          nst, lifetime = settled(alg, st, now, rate, p, -cost, spec, x)
        end
        if nst ~= nil then mark(KEYS[i], alg, nst, lifetime, p) end
      end
    end
  end
  commit()
  return finish(0)
end

local out = {}
local denied = false
local params = {}
for i = 1, n do
  local alg = tonumber(field(i, 1))
  local rate, p, cap = tonumber(field(i, 2)), tonumber(field(i, 3)), tonumber(field(i, 4))
  local cost, spec = tonumber(field(i, 5)), field(i, 6)
  local _, x = extra(field(i, 7)) -- never forced: all or nothing
  params[i] = {alg, rate, p, cap, spec, x}
  local st = load(i, alg, p)
  local nst, ok, rem, retry, reset, lifetime, token = apply(KEYS[i], alg, st, rate, p, cap, cost, spec, x, false)
  if ok and cost > 0 then mark(KEYS[i], alg, nst, lifetime, p) end
  if not ok then denied = true end
  reply(out, W * (i - 1), ok and 1 or 0, rem, retry, reset, token)
end

-- The cost-0 peek of request i against the state from before this call.
local function peek(i)
  local q = params[i]
  local _, _, rem, retry, reset = apply(KEYS[i], q[1], orig[KEYS[i]] or nil, q[2], q[3], q[4], 0, q[5], q[6], false)
  return rem, retry, reset
end

if denied then
  -- Nothing is written; allowed requests report their state as it
  -- stands, and no token.
  for i = 1, n do
    local b = W * (i - 1)
    if out[b + 1] == 1 then
      out[b + 2], out[b + 3], out[b + 4] = peek(i)
      out[b + 5] = 0
    end
  end
else
  commit()
end

if mode == "p" then
  local res = {}
  for i = 1, n do
    local b, r = W * (i - 1), (W + 3) * (i - 1)
    for j = 1, W do res[r + j] = out[b + j] end
    res[r + W + 1], res[r + W + 2], res[r + W + 3] = peek(i)
  end
  return finish(res)
end
return finish(out)
