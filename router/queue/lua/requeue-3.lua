--[[
  requeue: leases that ended before now go back to their model's queue with their original enqueue score (keeping
  age and FIFO order), unless a result exists or the batch no longer runs (cancelling: the lease is just dropped).
  KEYS[1] leases zset  KEYS[2] status counters  KEYS[3] lease owners hash
  ARGV[1] key prefix  ARGV[2] now ms  ARGV[3] max leases to process
  Returns {expired leases processed, requeued}.
]]
local due = redis.call("ZRANGEBYSCORE", KEYS[1], "-inf", "(" .. ARGV[2], "LIMIT", 0, tonumber(ARGV[3]))
local requeued = 0
for _, r in ipairs(due) do
  redis.call("ZREM", KEYS[1], r)
  redis.call("HDEL", KEYS[3], r)
  requeued = requeued + returnLease(ARGV[1], r, KEYS[2], ARGV[2])
end
return { #due, requeued }
