--[[
  heartbeat: keeps a live owner live until now + ttl (never shortening its deadline).
  KEYS[1] owners zset
  ARGV[1] owner token  ARGV[2] now ms  ARGV[3] ttl ms
  Returns 1 when the owner is live, 0 when it is not (declared dead by reclaim, or never opened): fenced.
]]
local untilMs = redis.call("ZSCORE", KEYS[1], ARGV[1])
if not untilMs then return 0 end
local want = tonumber(ARGV[2]) + tonumber(ARGV[3])
if tonumber(untilMs) < want then redis.call("ZADD", KEYS[1], want, ARGV[1]) end
return 1
