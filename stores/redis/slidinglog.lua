-- The sliding log (algorithm 5 on the wire): script.go puts this file
-- between clock.lua, which sets now, and script.lua, which calls these
-- functions for the requests of algorithm 5 in every mode. A port of
-- internal/memstore/slidinglog.go in integer microseconds.
--
-- State: a sorted set with one member per admitted event, scored by the
-- time it was admitted at, which is also a take's token. Members are ids,
-- written 16 digits wide so that their order as strings (which breaks ties
-- of score) is their order as numbers: a take of cost c adds c consecutive
-- ids drawn past the newest member's, and never before the time of the
-- take, so ids are unique in the key whatever instance sends the call (a
-- call resent after a lost reply is answered from its call key, never
-- applied twice).
--
-- An event counts while now < its time + the period. A request is decided
-- at the later of now and the newest event's time (time never goes back for
-- a key), and only an allowed take removes the events that have left the
-- window, as of its own time, in the call that adds its own: every later
-- decision is at or after it, so none finds gone an event it would count.

local function log_int(x) return string.format("%.0f", x) end
local function log_id(x) return string.format("%016.0f", x) end

-- log_load returns the state of the log at key k: the newest member's id
-- (0 for none) and time, the events this call adds and has not written yet
-- (pend, all at the newest time), and a memo of counts; nil when k holds
-- another type of value.
local function log_load(k)
  local top = redis.pcall("ZRANGE", k, -1, -1, "WITHSCORES")
  if top.err then return nil end
  local st = {top = 0, pend = 0, adds = {}, counts = {}}
  if top[2] then st.top, st.newest = tonumber(top[1]), tonumber(top[2]) end
  return st
end

-- log_stored is how many written events of st are after cut, remembered
-- in st, so that a peek of the state from before a call that then wrote
-- (mode "p") counts what it counted.
local function log_stored(k, st, cut)
  local c = st.counts[cut]
  if not c then
    c = redis.call("ZCOUNT", k, "(" .. log_int(cut), "+inf")
    st.counts[cut] = c
  end
  return c
end

-- log_nth is the time of the i-th oldest event after cut (from 0): a
-- written one while i < stored, else one this call adds, at time at.
local function log_nth(k, cut, stored, i, at)
  if i < stored then
    local r = redis.call("ZRANGEBYSCORE", k, "(" .. log_int(cut), "+inf", "WITHSCORES", "LIMIT", log_int(i), 1)
    return tonumber(r[2])
  end
  return at
end

-- log_take decides a take of cost on the log at k in state st. It returns
-- the new state, allowed, remaining, retry-after (for an allowed take, when
-- the oldest event in the window leaves: the RateLimit field's t),
-- reset-after and the token. A take fits when the events in the window
-- plus cost are at most rate; a forced take (a settlement) is added whether
-- or not it fits, and the log then keeps its newest rate events.
local function log_take(k, st, rate, p, cost, force)
  local at = now
  if st.newest and st.newest > at then at = st.newest end
  local cut = at - p
  local stored = log_stored(k, st, cut)
  local count = stored + st.pend
  local need = cost
  if need < 1 then need = 1 end
  if cost == 0 or (count + need > rate and not force) then
    local reset = 0
    if count > 0 then reset = st.newest + p - at end
    if count + need > rate then
      local rem = rate - count
      if rem < 0 then rem = 0 end
      return st, false, rem, log_nth(k, cut, stored, count + need - rate - 1, at) + p - at, reset, 0
    end
    local oldest = 0 -- a forced take replies its retry-after as it is
    if count > 0 and not force then oldest = log_nth(k, cut, stored, 0, at) + p - at end
    return st, true, rate - count, oldest, reset, 0
  end
  local add = cost
  if add > rate then add = rate end -- forced: the log keeps the newest rate
  local id = st.top + 1
  if id < at then id = at end
  if id < 1 then id = 1 end
  local adds = {}
  for i, a in ipairs(st.adds) do adds[i] = a end
  adds[#adds + 1] = {id, add, at}
  local nst = {top = id + add - 1, newest = at, pend = st.pend + add, adds = adds, counts = {},
    cut = cut, p = p, keep = rate, force = st.force or force}
  local first = count + add - rate -- the oldest event kept, counted from the oldest in the window
  if first < 0 then first = 0 end
  local kept = count + add - first
  local oldest = log_nth(k, cut, stored, first, at) + p - at
  if count + cost > rate then return nst, false, rate - kept, oldest, p, at end
  if force then oldest = 0 end -- a forced take replies its retry-after as it is
  return nst, true, rate - kept, oldest, p, at
end

-- log_write writes what st added in this call: it drops the events that
-- left the window before the newest take, adds the new ones, keeps the
-- newest events only after a forced take, and sets the TTL to when the
-- newest event leaves, plus slack (ms).
local function log_write(k, st, slack)
  if #st.adds == 0 then return end
  redis.call("ZREMRANGEBYSCORE", k, "-inf", log_int(st.cut))
  for _, a in ipairs(st.adds) do
    local i = 0
    while i < a[2] do
      local args = {}
      for j = i, math.min(a[2], i + 500) - 1 do
        args[#args + 1] = log_int(a[3])
        args[#args + 1] = log_id(a[1] + j)
      end
      redis.call("ZADD", k, unpack(args))
      i = i + 500
    end
  end
  if st.force then redis.call("ZREMRANGEBYRANK", k, 0, -st.keep - 1) end
  local ms = math.floor((st.newest + st.p - now + 999) / 1000)
  if ms < 1 then ms = 1 end
  redis.call("PEXPIRE", k, log_int(ms + slack))
  st.adds, st.pend, st.force = {}, 0, false
end

-- log_return gives back cost events: the newest of those a take at time
-- token added, or for token 0 the newest of all. It returns false when k
-- holds another type of value.
local function log_return(k, cost, token)
  local r = redis.pcall("ZCARD", k)
  if type(r) == "table" and r.err then return false end
  if cost <= 0 then return true end
  if token <= 0 then
    redis.call("ZREMRANGEBYRANK", k, -cost, -1)
    return true
  end
  local t = log_int(token)
  local ids = redis.call("ZREVRANGEBYSCORE", k, t, t, "LIMIT", 0, log_int(cost))
  local i = 1
  while i <= #ids do
    redis.call("ZREM", k, unpack(ids, i, math.min(#ids, i + 499)))
    i = i + 500
  end
  return true
end
