--[[
  complete: writes results exactly once each (first writer wins per request) and releases their leases. Takes
  one or more results (the dispatcher groups results that finish close together); each is handled as if alone.
  KEYS[1] leases zset  KEYS[2] status counters  KEYS[3] lease owners hash
  ARGV[1] key prefix  ARGV[2] now ms
  then per result: ARGV[3+7k] request id  ARGV[4+7k] index  ARGV[5+7k] "1" ok / "0" error  ARGV[6+7k] JSONL line
  ARGV[7+7k] owner token ("" = none: no fencing)  ARGV[8+7k] ARGV[9+7k] its output tokens on spare and dedicated
  capacity (added to the batch's spare_tokens / dedicated_tokens with the result, once)
  Returns an array with one code per result: 1 Ok, 2 Finalizing (that result was the batch's last), -1 NoBatch,
  -2 BatchClosed (finalizing or terminal), -3 Duplicate, -7 Fenced (the owner does not hold the lease: dropped).
]]
local codes = {}
-- Per batch: the hash fields read once and kept current as this script changes them.
local cache = {}
for i = 3, #ARGV, 7 do
  local rid, idx, ok, line, owner = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4]
  local spare, dedicated = tonumber(ARGV[i + 5]) or 0, tonumber(ARGV[i + 6]) or 0
  local bid = splitRid(rid)
  local bkey = ARGV[1] .. "b:" .. bid
  local b = cache[bid]
  if not b then
    local h = redis.call("HMGET", bkey, "status", "model", "total", "completed", "failed", "leased")
    b = { st = h[1], model = h[2], total = tonumber(h[3]) or 0, completed = tonumber(h[4]) or 0, failed = tonumber(h[5]) or 0, leased = tonumber(h[6]) or 0 }
    cache[bid] = b
  end
  local code
  if not b.st then
    code = NO_BATCH
  elseif b.st ~= "in_progress" and b.st ~= "cancelling" then
    code = BATCH_CLOSED
  elseif owner ~= "" and (not redis.call("ZSCORE", KEYS[1], rid) or redis.call("HGET", KEYS[3], rid) ~= owner) then
    code = FENCED
  else
    -- A request is either waiting (in its model's queue) or leased, never both.
    local hadLease = redis.call("ZREM", KEYS[1], rid) == 1
    if hadLease then
      redis.call("HDEL", KEYS[3], rid)
      b.leased = redis.call("HINCRBY", bkey, "leased", -1)
    end
    if redis.call("HSETNX", ARGV[1] .. "r:" .. bid, idx, ok .. line) == 0 then
      code = DUPLICATE
    else
      if not hadLease then redis.call("ZREM", ARGV[1] .. "q:" .. b.model, rid) end
      if ok == "1" then
        b.completed = redis.call("HINCRBY", bkey, "completed", 1)
      else
        b.failed = redis.call("HINCRBY", bkey, "failed", 1)
      end
      if spare > 0 then redis.call("HINCRBY", bkey, "spare_tokens", spare) end
      if dedicated > 0 then redis.call("HINCRBY", bkey, "dedicated_tokens", dedicated) end
      code = OK
      -- Same rule as maybeFinalizing, on the values at hand (saves reads on the hot path).
      if (b.st == "in_progress" and b.completed + b.failed >= b.total) or (b.st == "cancelling" and b.leased <= 0) then
        local target = "completed"
        if b.st == "cancelling" then target = "cancelled" end
        setStatus(bkey, KEYS[2], b.st, "finalizing")
        redis.call("HSET", bkey, "target", target, "finalizing_at", ARGV[2])
        b.st = "finalizing"
        code = FINALIZING
      end
    end
  end
  codes[#codes + 1] = code
end
return codes
