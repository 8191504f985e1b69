--[[
  open-owner: a new lease owner (a dispatcher incarnation) with a fencing token never handed out before.
  KEYS[1] owners zset (token -> heartbeat end ms)  KEYS[2] token counter
  ARGV[1] now ms  ARGV[2] ttl ms
  Returns the token (a positive integer).
]]
local owner = redis.call("INCR", KEYS[2])
redis.call("ZADD", KEYS[1], tonumber(ARGV[1]) + tonumber(ARGV[2]), owner)
return owner
