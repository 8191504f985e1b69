--[[
  release: gives leases back before they run out (a router stopping cleanly): each request returns to its model's
  queue with its original enqueue score, unless a result exists or the batch no longer runs.
  KEYS[1] leases zset  KEYS[2] status counters
  ARGV[1] key prefix  ARGV[2] now ms  ARGV[3..] request ids
  Returns the number of requests put back in the queue.
]]
local requeued = 0
for i = 3, #ARGV do
  if redis.call("ZREM", KEYS[1], ARGV[i]) == 1 then
    requeued = requeued + returnLease(ARGV[1], ARGV[i], KEYS[2], ARGV[2])
  end
end
return requeued
