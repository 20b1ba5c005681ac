-- The plain GCRA takes of package redisstore: requests of cost >= 1, each
-- on its own key, without pacing, settlement or a lease; everything else
-- goes to script.lua. One call carries one take, or a coalesced batch of
-- them decided independently (as script.lua's mode "i"). Each take reads
-- its key once and writes it at most once, and computes exactly as
-- script.lua's take_gcra does, in integer microseconds below 2^53. On
-- Redis 7, when the caller expects keys that hold no state (ARGV[4]), a
-- take that would be allowed on an absent key (alone, or on a key no other
-- take of its batch names) reads and writes it in one command, SET NX GET,
-- which writes nothing when the key holds a value and replies it.
--
-- KEYS[i] the state key of take i, "<tat>:<t>[:<call>]": the theoretical
--         arrival time, the interval it counts in, and the call that wrote
--         it.
-- ARGV[1] the call: "" (the client never resends), "<id>" when sent the
--         first time, "!<id>" when the client resends it (a reply lost).
--         Take i > 1 of a call writes "<id>/<i>" as its call.
-- ARGV[2] now in Unix µs, or "" for the server's TIME (clock.lua).
-- ARGV[3] extra TTL in ms added to each write (0 with server time).
--         A key named by several takes is read once and written once.
-- ARGV[4] "1" to try SET NX GET first (the caller's last takes found their
--         keys without state), "" to GET first.
-- ARGV[3i+2], ARGV[3i+3], ARGV[3i+4]: take i's interval t in µs, capacity
--         and cost.
--
-- Reply: five values per take: allowed (1 or 0; 2 when allowed on a key
-- that held no state), remaining, retry-after µs, reset-after µs and the
-- token (the key's time after the take), as script.lua's (which has no
-- 2); or {-1, 0, 0, 0, 0} when the key holds another type of
-- value; -2 when a resent take would be allowed but its key was written by
-- another call since (whether the first send applied is unknown: the
-- caller fails rather than risk applying it twice); -3 when the state
-- needs script.lua's exact arithmetic (a raised limit's conversion of a
-- debt beyond 2^53): nothing was written for the take in either case.
local MARKER, TAT_CEIL = 7000000000000000, 4503599627370496
local floor = math.floor
local call0 = ARGV[1]
local resent = string.byte(call0, 1) == 33 -- "!"
if resent then call0 = string.sub(call0, 2) end

-- State values are integers below 2^53: "%d" writes them exactly where
-- Lua's C long has 64 bits (every platform Redis builds for but LLP64
-- Windows ports), at half the cost of "%.0f", which the others keep.
local FMT = "%.0f:%.0f"
if string.format("%d", TAT_CEIL) == "4503599627370496" then FMT = "%d:%d" end
-- Redis 7 (which added REDIS_VERSION_NUM) sets a key only if absent and
-- replies what it held in one command (SET NX GET): a take of a key that
-- holds no state reads and writes it at once.
local nxget = redis.REDIS_VERSION_NUM ~= nil and ARGV[4] == "1"
-- In a batch, a key named again reads what the take before wrote, and is
-- written once, at the end, with its last state; a lone take, or the take
-- of a key no other take of the batch names, writes at once.
local batch = #KEYS > 1
local written, order, named = nil, nil, nil
if batch then
  written, order = {}, {}
end
-- How often each key is named, read only where SET NX GET may be used.
if batch and nxget then
  named = {}
  for i = 1, #KEYS do named[KEYS[i]] = (named[KEYS[i]] or 0) + 1 end
end
local extra = tonumber(ARGV[3])

-- state is what a take leaves on its key: the value of time nt counted in
-- interval within, written by call, and its TTL in ms (until nt, at least 1).
local function state(nt, within, call)
  local ms = floor((nt - now + 999) / 1000)
  if ms < 1 then ms = 1 end
  local s = string.format(FMT, nt, within)
  if call ~= "" then s = s .. ":" .. call end
  return s, ms
end

local function take(key, call, t, cap, cost)
  local tau = t * cap
  local w = batch and written[key]
  local v
  if w then
    v = w[1]
  elseif nxget and not resent and cost <= cap and (not batch or named[key] == 1) then
    -- What a take of an absent key writes, written only if the key is
    -- absent; otherwise v is what it holds, and the take goes on as usual.
    local nt = math.min(now + cost * t, TAT_CEIL)
    local s, ms = state(nt, t, call)
    v = redis.pcall("SET", key, s, "PX", ms + extra, "NX", "GET")
    if type(v) == "table" then
      -- Another type of value is -1, as for GET; any other error (OOM at
      -- maxmemory) is the script's.
      if string.sub(v.err or "", 1, 9) ~= "WRONGTYPE" then error(v) end
      return -1, 0, 0, 0, 0
    end
    if not v then return 2, floor((tau - (nt - now)) / t), 0, nt - now, nt end
  else
    v = redis.pcall("GET", key)
    if type(v) == "table" then return -1, 0, 0, 0, 0 end
  end
  local tat, from, by, within = nil, nil, nil, t
  if v then
    local i = string.find(v, ":", 1, true)
    if i then
      local j = string.find(v, ":", i + 1, true)
      tat = tonumber(string.sub(v, 1, i - 1))
      if j then
        from, by = tonumber(string.sub(v, i + 1, j - 1)), string.sub(v, j + 1)
      else
        from = tonumber(string.sub(v, i + 1))
      end
      if not from then tat = nil end
    else
      tat = tonumber(v) -- a split marker, or a bucket the split protocol wrote
    end
  end
  if by and call ~= "" and by == call then
    -- This take was applied already, and its reply lost: reply again.
    return 1, math.max(0, floor((tau - (tat - now)) / t)), 0, math.max(0, tat - now), tat
  end
  if tat and from and tat > now and tat < MARKER then
    if t >= from then
      within = from
    else
      -- A raised limit: the debt re-expressed in the shorter interval,
      -- rounded up (script.lua's gcra_decode).
      local debt = tat - now
      local q = floor(debt / from)
      local r = debt - q * from
      if t * r >= 9007199254740992 then return -3, 0, 0, 0, 0 end
      tat = now + q * t + math.ceil(t * r / from)
    end
  end
  if tat == nil or tat < now then tat = now end
  local wait = (tat - now - tau) + cost * t
  if wait > 0 then
    return 0, math.max(0, floor((tau - (tat - now)) / t)), wait, tat - now, 0
  end
  if resent then return -2, 0, 0, 0, 0 end
  local nt = math.min(tat + cost * t, TAT_CEIL)
  local s, ms = state(nt, within, call)
  if not batch then
    redis.call("SET", key, s, "PX", ms + extra)
  elseif w then
    w[1], w[2] = s, ms
  else
    written[key] = {s, ms}
    order[#order + 1] = key
  end
  local allowed = 1
  if not v then allowed = 2 end
  return allowed, floor((tau - (nt - now)) / t), 0, nt - now, nt
end

if not batch then return {take(KEYS[1], call0, tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]))} end
local out = {}
for i = 1, #KEYS do
  local call = call0
  if i > 1 and call ~= "" then call = call .. "/" .. i end
  local a = 3 * i + 1
  local n = #out
  out[n + 1], out[n + 2], out[n + 3], out[n + 4], out[n + 5] =
    take(KEYS[i], call, tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]))
end
for _, key in ipairs(order) do
  local w = written[key]
  redis.call("SET", key, w[1], "PX", w[2] + extra)
end
return out
