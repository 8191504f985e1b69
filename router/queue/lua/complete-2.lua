--[[
  complete: writes results exactly once each (first writer wins per request) and releases their leases. Takes
  one or more results (the dispatcher groups results that finish close together); each is handled as if alone.
  KEYS[1] leases zset  KEYS[2] status counters
  ARGV[1] key prefix  ARGV[2] now ms
  then per result: ARGV[3+4k] request id  ARGV[4+4k] index  ARGV[5+4k] "1" ok / "0" error  ARGV[6+4k] JSONL line
  Returns an array with one code per result: 1 Ok, 2 Finalizing (that result was the batch's last), -1 NoBatch,
  -2 BatchClosed (finalizing or terminal), -3 Duplicate.
]]
local codes = {}
for i = 3, #ARGV, 4 do
  local rid, idx, ok, line = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  local bid = splitRid(rid)
  local bkey = ARGV[1] .. "b:" .. bid
  local b = redis.call("HMGET", bkey, "status", "model", "total", "completed", "failed", "leased")
  local st = b[1]
  local code
  if not st then
    code = NO_BATCH
  elseif st ~= "in_progress" and st ~= "cancelling" then
    code = BATCH_CLOSED
  else
    local leased = tonumber(b[6])
    if redis.call("ZREM", KEYS[1], rid) == 1 then leased = redis.call("HINCRBY", bkey, "leased", -1) end
    if redis.call("HSETNX", ARGV[1] .. "r:" .. bid, idx, ok .. line) == 0 then
      code = DUPLICATE
    else
      redis.call("ZREM", ARGV[1] .. "q:" .. b[2], rid)
      local done
      if ok == "1" then
        done = redis.call("HINCRBY", bkey, "completed", 1) + tonumber(b[5])
      else
        done = redis.call("HINCRBY", bkey, "failed", 1) + tonumber(b[4])
      end
      code = OK
      -- Same rule as maybeFinalizing, on the values at hand (saves a read on the hot path).
      if (st == "in_progress" and done >= tonumber(b[3])) or (st == "cancelling" and leased <= 0) then
        local target = "completed"
        if st == "cancelling" then target = "cancelled" end
        setStatus(bkey, KEYS[2], st, "finalizing")
        redis.call("HSET", bkey, "target", target, "finalizing_at", ARGV[2])
        code = FINALIZING
      end
    end
  end
  codes[#codes + 1] = code
end
return codes
