--[[
  complete: writes a request's result exactly once (first writer wins) and releases its lease.
  KEYS[1] batch hash  KEYS[2] results hash (<prefix>r:<id>; field index, value "1"/"0" + line)  KEYS[3] leases zset
  KEYS[4] status counters
  ARGV[1] key prefix  ARGV[2] request id  ARGV[3] index  ARGV[4] "1" ok / "0" error  ARGV[5] JSONL line  ARGV[6] now ms
  Returns 1 Ok, 2 Finalizing (last result: batch moved to finalizing), -1 NoBatch, -2 BatchClosed, -3 Duplicate.
]]
local b = redis.call("HMGET", KEYS[1], "status", "model")
local st, model = b[1], b[2]
if not st then return NO_BATCH end
if st ~= "in_progress" and st ~= "cancelling" then return BATCH_CLOSED end
if redis.call("ZREM", KEYS[3], ARGV[2]) == 1 then redis.call("HINCRBY", KEYS[1], "leased", -1) end
if redis.call("HSETNX", KEYS[2], ARGV[3], ARGV[4] .. ARGV[5]) == 0 then return DUPLICATE end
redis.call("ZREM", ARGV[1] .. "q:" .. model, ARGV[2])
if ARGV[4] == "1" then redis.call("HINCRBY", KEYS[1], "completed", 1) else redis.call("HINCRBY", KEYS[1], "failed", 1) end
if maybeFinalizing(KEYS[1], KEYS[4], ARGV[6]) then return FINALIZING end
return OK
