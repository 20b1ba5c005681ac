-- The rate-limit engine of package redisstore: every algorithm, one or many
-- requests, in one atomic call. A port of internal/memstore/algorithms.go
-- working in integer microseconds.
--
-- KEYS[i]  the state key of request i. On Cluster all keys share one slot.
-- ARGV[1]  mode: "t" take all-or-nothing; "p" the same, and also reply for
--          each request with the cost-0 peek of its state as it was before
--          the call (for compensating a TakeAll across shards); "r" return
--          (refund) each request's cost; "i" independent requests, each
--          decided on its own in order, as if each were its own call (the
--          coalesced checks of many callers): a negative cost returns -cost
--          units, and algorithm 4 is a GCRA lease (see below).
-- ARGV[2]  now in Unix microseconds, or "" to read the server's TIME.
-- ARGV[3]  extra TTL in milliseconds added to every write (0 with server time).
-- ARGV[4+6(i-1)..] six fields per request: algorithm (0 GCRA, 1 sliding
--          window, 2 fixed window, 3 concurrency), rate, span in µs (the
--          period; for GCRA the interval, ceil(period/rate), which the
--          caller computes exactly), capacity, cost, and the explicit window
--          end in µs ("" means an epoch-aligned window).
--
-- Reply, modes "t", "p" and "i": four integers per request, allowed (1 or
-- 0), remaining, retry-after µs and reset-after µs; mode "p" adds three
-- more, the peek's remaining, retry-after and reset-after. Mode "r" replies
-- 0. In mode "i" a return replies 0 0 0 0, a request whose key holds
-- another type of value replies -1 0 0 0 (the others still run), and a
-- lease replies the units granted in place of allowed.
--
-- A lease (algorithm 4, mode "i") is a GCRA take of cost units that, when
-- allowed, also takes up to rate-cost more units if they are available now,
-- so that the caller can spend them locally: the rate field carries the
-- most units to grant.
--
-- State, one string per key, always written with PX in the same call:
--   GCRA            "<tat>"                  the theoretical arrival time
--   sliding window  "<start>:<cur>:<prev>"   current window start and counts
--   fixed window    "<end>:<count>"          the window end and its count
--   concurrency     "<expires>:<inflight>"   when the slots expire
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
-- new state, allowed, remaining, retry-after, reset-after, and the state's
-- lifetime in µs from now (only used when the state is written).

local function gcra(tat, now, t, cap, cost)
  local tau = t * cap
  if tat == nil or tat < now then tat = now end
  local need = max(cost, 1)
  local wait = (tat - now - tau) + need * t
  if wait > 0 then
    return nil, false, max(0, idiv(tau - (tat - now), t)), wait, tat - now, 0
  end
  tat = tat + cost * t
  return tat, true, idiv(tau - (tat - now), t), 0, tat - now, tat - now
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

local function sliding(st, now, rate, p, cost)
  local start = now - mod(now, p)
  local cur, prev = 0, 0
  if st then
    if st[1] == start then
      cur, prev = st[2], st[3]
    elseif st[1] == start - p then
      prev = st[2]
    end
  end
  local e = now - start
  local weighted = muldivceil(prev, p - e, p)
  local need = max(cost, 1)
  if cur + need + weighted > rate then
    return nil, false, max(0, rate - cur - weighted),
      sliding_retry(cur, prev, need, start, now, rate, p),
      sliding_reset(cur, prev, start, now, p), 0
  end
  cur = cur + cost
  return {start, cur, prev}, true, rate - cur - weighted, 0,
    sliding_reset(cur, prev, start, now, p), (start - now) + 2 * p
end

local function window_end(now, p, wend)
  if wend then return wend end
  return now - mod(now, p) + p
end

local function fixed(st, now, rate, p, cost, wend)
  local stop = window_end(now, p, wend)
  local count = 0
  if st and st[1] == stop then count = st[2] end
  local need = max(cost, 1)
  local left = max(0, stop - now) -- an explicit window may have ended
  if count + need > rate then
    return nil, false, max(0, rate - count), left, left, 0
  end
  count = count + cost
  local reset = 0
  if count > 0 then reset = left end
  return {stop, count}, true, rate - count, 0, reset, stop - now
end

local CONCURRENCY_RETRY_HINT = 1000000 -- 1s, as in memstore

local function concurrency(st, now, rate, p, cost)
  local expires, inflight = 0, 0
  if st then
    expires = st[1]
    if expires > now then inflight = st[2] end
  end
  local need = max(cost, 1)
  if inflight + need > rate then
    return nil, false, max(0, rate - inflight), min(CONCURRENCY_RETRY_HINT, expires - now), expires - now, 0
  end
  if cost == 0 then
    return nil, true, rate - inflight, 0, max(0, expires - now), 0
  end
  inflight = inflight + cost
  return {now + p, inflight}, true, rate - inflight, 0, p, p
end

-- Refunds: the new state and its lifetime, or nil to leave the key alone,
-- or false to delete it.
local function gcra_return(tat, now, t, cost)
  tat = max(now, tat - cost * t)
  if tat <= now then return false, 0 end
  return tat, tat - now
end

local function window_return(alg, st, now, p, cost, wend)
  if alg == 1 then
    local start = now - mod(now, p)
    if st[1] ~= start then return nil end
    return {st[1], max(0, st[2] - cost), st[3]}, (start - now) + 2 * p
  elseif alg == 2 then
    if st[1] ~= window_end(now, p, wend) then return nil end
    return {st[1], max(0, st[2] - cost)}, st[1] - now
  end
  if st[1] <= now then return nil end
  return {st[1], max(0, st[2] - cost)}, st[1] - now
end

local function decode(alg, v)
  if not v then return nil end
  if alg == 0 then return tonumber(v) end
  local a, b, c = string.match(v, "^(%-?%d+):(%d+):?(%d*)$")
  if not a then return nil end
  return {tonumber(a), tonumber(b), tonumber(c) or 0}
end

local function int(x) return string.format("%.0f", x) end

local function encode(alg, st)
  if alg == 0 then return int(st) end
  if alg == 1 then return int(st[1]) .. ":" .. int(st[2]) .. ":" .. int(st[3]) end
  return int(st[1]) .. ":" .. int(st[2])
end

local mode = ARGV[1]
local now = tonumber(ARGV[2])
if not now then
  -- Redis 3.2 to 4 replicate scripts verbatim unless told to replicate
  -- their effects, and refuse writes after TIME; from 5 on effects are the
  -- default, and 7 (which added REDIS_VERSION_NUM) knows nothing else.
  if not redis.REDIS_VERSION_NUM and redis.replicate_commands then redis.replicate_commands() end
  local t = redis.call("TIME")
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local slack = tonumber(ARGV[3])
local n = #KEYS

-- take_gcra is a whole GCRA take of cost units on key k, whose stored value
-- is v (false when absent), without the tables and closures of the general
-- case below: the fast path of the most common checks. Same arithmetic as
-- gcra(). It returns allowed (1 or 0), remaining, retry-after and
-- reset-after, and writes the new state when it consumed.
local function take_gcra(k, v, t, cap, cost)
  local tat = tonumber(v)
  if tat == nil or tat < now then tat = now end
  local tau = t * cap
  local need = cost
  if need < 1 then need = 1 end
  local wait = (tat - now - tau) + need * t
  if wait > 0 then
    local rem = floor((tau - (tat - now)) / t)
    if rem < 0 then rem = 0 end
    return 0, rem, wait, tat - now
  end
  if cost > 0 then
    tat = tat + cost * t
    local ms = floor((tat - now + 999) / 1000)
    if ms < 1 then ms = 1 end
    redis.call("SET", k, string.format("%.0f", tat), "PX", string.format("%.0f", ms + slack))
  end
  return 1, floor((tau - (tat - now)) / t), 0, tat - now
end

-- Fast path: one GCRA take, the most common call.
if n == 1 and ARGV[4] == "0" and (mode == "t" or mode == "i") then
  local t, cap, cost = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
  if cost >= 0 then
    return {take_gcra(KEYS[1], redis.call("GET", KEYS[1]), t, cap, cost)}
  end
end

local cache, orig = {}, {}
local function load(i, alg)
  local k = KEYS[i]
  local s = cache[k]
  if s == nil then
    s = decode(alg, redis.call("GET", k)) or false
    cache[k], orig[k] = s, s
  end
  return s or nil
end

local function apply(alg, st, rate, p, cap, cost, wend)
  if alg == 0 then return gcra(st, now, p, cap, cost) end
  if alg == 1 then return sliding(st, now, rate, p, cost) end
  if alg == 2 then return fixed(st, now, rate, p, cost, wend) end
  return concurrency(st, now, rate, p, cost)
end

local dirty, life, algs, order = {}, {}, {}, {}
local function mark(k, alg, st, lifetime)
  if not dirty[k] then order[#order + 1] = k end
  cache[k], dirty[k], life[k], algs[k] = st, true, lifetime, alg
end

local function commit()
  for _, k in ipairs(order) do
    local st = cache[k]
    if st then
      local ms = max(1, idiv(life[k] + 999, 1000)) + slack
      redis.call("SET", k, encode(algs[k], st), "PX", int(ms))
    else
      redis.call("DEL", k)
    end
  end
end

local function field(i, j) return ARGV[3 + 6 * (i - 1) + j] end

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
    local b = 4 * (i - 1)
    local k = KEYS[i]
    local at = 3 + 6 * (i - 1)
    local cost = tonumber(ARGV[at + 5])
    if ARGV[at + 1] == "0" and cost >= 0 and count[k] == 1 then
      local v = redis.pcall("GET", k)
      if type(v) == "table" then
        out[b + 1], out[b + 2], out[b + 3], out[b + 4] = -1, 0, 0, 0
      else
        out[b + 1], out[b + 2], out[b + 3], out[b + 4] =
          take_gcra(k, v, tonumber(ARGV[at + 3]), tonumber(ARGV[at + 4]), cost)
      end
    else
      local b = 4 * (i - 1)
      local k = KEYS[i]
      local alg = tonumber(field(i, 1))
      local rate, p, cap = tonumber(field(i, 2)), tonumber(field(i, 3)), tonumber(field(i, 4))
      local cost, wend = tonumber(field(i, 5)), tonumber(field(i, 6))
      local lease = alg == 4
      if lease then alg = 0 end
      local st = cache[k]
      if st == nil then
        local v = redis.pcall("GET", k)
        if type(v) == "table" and v.err then
          st = nil -- another type: this request fails, the others go on
        else
          st = decode(alg, v) or false
          cache[k] = st
        end
      end
      if st == nil then
        out[b + 1], out[b + 2], out[b + 3], out[b + 4] = -1, 0, 0, 0
      elseif cost < 0 then
        if st then
          local nst, lifetime
          if alg == 0 then
            nst, lifetime = gcra_return(st, now, p, -cost)
          else
            nst, lifetime = window_return(alg, st, now, p, -cost, wend)
          end
          if nst ~= nil then mark(k, alg, nst, lifetime) end
        end
        out[b + 1], out[b + 2], out[b + 3], out[b + 4] = 0, 0, 0, 0
      else
        local nst, ok, rem, retry, reset, lifetime = apply(alg, st or nil, rate, p, cap, cost, wend)
        local code = ok and 1 or 0
        if ok and lease then
          -- Grant up to rate units in all: the cost, and whatever else fits.
          local extra = min(rate - cost, rem)
          if extra > 0 then
            nst = nst + extra * p
            rem, reset, lifetime = rem - extra, nst - now, nst - now
          end
          code = cost + max(extra, 0)
        end
        if ok and code > 0 and (cost > 0 or lease) then mark(k, alg, nst, lifetime) end
        out[b + 1], out[b + 2], out[b + 3], out[b + 4] = code, rem, retry, reset
      end
    end
  end
  commit()
  return out
end

if mode == "r" then
  for i = 1, n do
    local alg = tonumber(field(i, 1))
    local p, cost = tonumber(field(i, 3)), tonumber(field(i, 5))
    local st = load(i, alg)
    if st then
      local nst, lifetime
      if alg == 0 then
        nst, lifetime = gcra_return(st, now, p, cost)
      else
        nst, lifetime = window_return(alg, st, now, p, cost, tonumber(field(i, 6)))
      end
      if nst ~= nil then mark(KEYS[i], alg, nst, lifetime) end
    end
  end
  commit()
  return 0
end

local out = {}
local denied = false
local params = {}
for i = 1, n do
  local alg = tonumber(field(i, 1))
  local rate, p, cap = tonumber(field(i, 2)), tonumber(field(i, 3)), tonumber(field(i, 4))
  local cost, wend = tonumber(field(i, 5)), tonumber(field(i, 6))
  params[i] = {alg, rate, p, cap, wend}
  local st = load(i, alg)
  local nst, ok, rem, retry, reset, lifetime = apply(alg, st, rate, p, cap, cost, wend)
  if ok and cost > 0 then mark(KEYS[i], alg, nst, lifetime) end
  if not ok then denied = true end
  out[#out + 1] = ok and 1 or 0
  out[#out + 1] = rem
  out[#out + 1] = retry
  out[#out + 1] = reset
end

-- The cost-0 peek of request i against the state from before this call.
local function peek(i)
  local q = params[i]
  local _, _, rem, retry, reset = apply(q[1], orig[KEYS[i]] or nil, q[2], q[3], q[4], 0, q[5])
  return rem, retry, reset
end

if denied then
  -- Nothing is written; allowed requests report their state as it stands.
  for i = 1, n do
    local b = 4 * (i - 1)
    if out[b + 1] == 1 then
      out[b + 2], out[b + 3], out[b + 4] = peek(i)
    end
  end
else
  commit()
end

if mode == "p" then
  local res = {}
  for i = 1, n do
    local b, r = 4 * (i - 1), 7 * (i - 1)
    for j = 1, 4 do res[r + j] = out[b + j] end
    res[r + 5], res[r + 6], res[r + 7] = peek(i)
  end
  return res
end
return out
