-- The clock of the Store's scripts: script.go puts this prelude before
-- script.lua and before the hot-key marker script, which both take the
-- time of a call as ARGV[2].
--
-- now is ARGV[2], the caller's time in Unix microseconds, or, when ARGV[2]
-- is "", the server's TIME.
local now = tonumber(ARGV[2])
if not now then
  -- Redis 3.2 to 4 replicate scripts verbatim unless told to replicate
  -- their effects, and refuse writes after TIME; from 5 on effects are the
  -- default, and 7 (which added REDIS_VERSION_NUM) knows nothing else.
  if not redis.REDIS_VERSION_NUM and redis.replicate_commands then redis.replicate_commands() end
  local t = redis.call("TIME")
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
