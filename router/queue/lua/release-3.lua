--[[
  release: gives leases back before they run out (a router stopping cleanly): each request returns to its model's
  queue with its original enqueue score, unless a result exists or the batch no longer runs. With an owner, only the
  leases that owner holds.
  KEYS[1] leases zset  KEYS[2] status counters  KEYS[3] lease owners hash
  ARGV[1] key prefix  ARGV[2] now ms  ARGV[3] owner token ("" = any)  ARGV[4..] request ids
  Returns the number of requests put back in the queue.
]]
local owner = ARGV[3]
local requeued = 0
for i = 4, #ARGV do
  local r = ARGV[i]
  if owner == "" or redis.call("HGET", KEYS[3], r) == owner then
    if redis.call("ZREM", KEYS[1], r) == 1 then
      redis.call("HDEL", KEYS[3], r)
      requeued = requeued + returnLease(ARGV[1], r, KEYS[2], ARGV[2])
    end
  end
end
return requeued
