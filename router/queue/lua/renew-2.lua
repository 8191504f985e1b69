--[[
  renew: extends leases still held to a later end, never shortening one and never re-leasing a request that has no
  lease (finished or requeued). With an owner, only the leases that owner holds.
  KEYS[1] leases zset  KEYS[2] lease owners hash
  ARGV[1] new lease end ms  ARGV[2] owner token ("" = any)  ARGV[3..] request ids
  Returns the number of leases extended.
]]
local owner = ARGV[2]
local n = 0
for i = 3, #ARGV do
  if owner == "" or redis.call("HGET", KEYS[2], ARGV[i]) == owner then
    -- XX: only requests still leased; GT: never shortened; CH: count the changed scores.
    n = n + redis.call("ZADD", KEYS[1], "XX", "GT", "CH", ARGV[1], ARGV[i])
  end
end
return n
