--[[
  complete: writes a request's result exactly once (first writer wins) and releases its lease.
  KEYS[1] batch hash  KEYS[2] results hash (<prefix>r:<id>; field index, value "1"/"0" + line)  KEYS[3] leases zset
  KEYS[4] status counters
  ARGV[1] key prefix  ARGV[2] request id  ARGV[3] index  ARGV[4] "1" ok / "0" error  ARGV[5] JSONL line  ARGV[6] now ms
  Returns 1 Ok, 2 Finalizing (last result: batch moved to finalizing), -1 NoBatch, -2 BatchClosed, -3 Duplicate.
]]
local b = redis.call("HMGET", KEYS[1], "status", "model", "total", "completed", "failed", "leased")
local st = b[1]
if not st then return NO_BATCH end
if st ~= "in_progress" and st ~= "cancelling" then return BATCH_CLOSED end
local leased = tonumber(b[6])
if redis.call("ZREM", KEYS[3], ARGV[2]) == 1 then leased = redis.call("HINCRBY", KEYS[1], "leased", -1) end
if redis.call("HSETNX", KEYS[2], ARGV[3], ARGV[4] .. ARGV[5]) == 0 then return DUPLICATE end
redis.call("ZREM", ARGV[1] .. "q:" .. b[2], ARGV[2])
local done
if ARGV[4] == "1" then
  done = redis.call("HINCRBY", KEYS[1], "completed", 1) + tonumber(b[5])
else
  done = redis.call("HINCRBY", KEYS[1], "failed", 1) + tonumber(b[4])
end
-- Same rule as maybeFinalizing, on the values at hand (saves a read on the hot path).
if (st == "in_progress" and done >= tonumber(b[3])) or (st == "cancelling" and leased <= 0) then
  local target = "completed"
  if st == "cancelling" then target = "cancelled" end
  setStatus(KEYS[1], KEYS[4], st, "finalizing")
  redis.call("HSET", KEYS[1], "target", target, "finalizing_at", ARGV[6])
  return FINALIZING
end
return OK
