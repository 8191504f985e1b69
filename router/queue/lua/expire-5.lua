--[[
  expire: past its window, an in_progress (or validating) batch stops: unfinished requests leave the queue and
  their leases, and the batch moves to finalizing with target expired (its error file reports them).
  KEYS[1] batch hash  KEYS[2] results hash  KEYS[3] leases zset  KEYS[4] status counters  KEYS[5] lease owners hash
  ARGV[1] key prefix  ARGV[2] batch id  ARGV[3] now ms
  Returns 2 Finalizing, -1 NoBatch, -5 WrongState, -6 NotDue.
]]
local b = redis.call("HMGET", KEYS[1], "status", "model", "total", "expires_at")
local st = b[1]
if not st then return NO_BATCH end
if st ~= "in_progress" and st ~= "validating" then return WRONG_STATE end
if tonumber(ARGV[3]) < tonumber(b[4]) then return NOT_DUE end
local total = tonumber(b[3])
local removedLeases = 0
for i = 0, total - 1 do
  if redis.call("HEXISTS", KEYS[2], i) == 0 then
    local r = rid(ARGV[2], i)
    redis.call("ZREM", ARGV[1] .. "q:" .. b[2], r)
    if redis.call("ZREM", KEYS[3], r) == 1 then
      removedLeases = removedLeases + 1
      redis.call("HDEL", KEYS[5], r)
    end
  end
end
redis.call("HINCRBY", KEYS[1], "leased", -removedLeases)
setStatus(KEYS[1], KEYS[4], st, "finalizing")
redis.call("HSET", KEYS[1], "target", "expired", "finalizing_at", ARGV[3])
return FINALIZING
