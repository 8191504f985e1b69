--[[
  release: gives leases back before they run out (a router stopping cleanly): each request returns to its model's
  queue with its original enqueue score, unless a result exists or the batch no longer runs.
  KEYS[1] leases zset  KEYS[2] status counters
  ARGV[1] key prefix  ARGV[2] now ms  ARGV[3..] request ids
  Returns the number of requests put back in the queue.
]]
local requeued = 0
for i = 3, #ARGV do
  local r = ARGV[i]
  if redis.call("ZREM", KEYS[1], r) == 1 then
    local bid, idx = splitRid(r)
    local bkey = ARGV[1] .. "b:" .. bid
    local b = redis.call("HMGET", bkey, "status", "model", "enqueued_at")
    if b[1] then
      redis.call("HINCRBY", bkey, "leased", -1)
      if b[1] == "in_progress" and redis.call("HEXISTS", ARGV[1] .. "r:" .. bid, idx) == 0 then
        redis.call("ZADD", ARGV[1] .. "q:" .. b[2], b[3], r)
        requeued = requeued + 1
      else
        maybeFinalizing(bkey, KEYS[2], ARGV[2])
      end
    end
  end
end
return requeued
