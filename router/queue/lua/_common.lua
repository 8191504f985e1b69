--[[
  Helpers prepended to every queue script by router/queue/scripts.ts (not a script of its own).
  Return codes (router/queue/types.ts QueueCode): 1 Ok, 2 Finalizing, -1 NoBatch, -2 BatchClosed, -3 Duplicate,
  -4 Exists, -5 WrongState, -6 NotDue, -7 Fenced.
  Lease owners: <prefix>owners zset (fencing token -> heartbeat end ms), <prefix>owner-seq (the last token handed
  out), <prefix>lo hash (request id -> token of the owner holding its lease; only leases claimed with an owner).
]]
local OK, FINALIZING, NO_BATCH, BATCH_CLOSED, DUPLICATE, EXISTS, WRONG_STATE, NOT_DUE, FENCED = 1, 2, -1, -2, -3, -4, -5, -6, -7

-- Moves batch hash `bkey` to status `to`, keeping the per-status counters in `bst` exact.
local function setStatus(bkey, bst, from, to)
  redis.call("HSET", bkey, "status", to)
  redis.call("HINCRBY", bst, from, -1)
  redis.call("HINCRBY", bst, to, 1)
end

-- in_progress with every result written -> finalizing(completed); cancelling with no lease -> finalizing(cancelled).
-- Returns true when the batch moved.
local function maybeFinalizing(bkey, bst, now)
  local b = redis.call("HMGET", bkey, "status", "total", "completed", "failed", "leased")
  local st, total, done, leased = b[1], tonumber(b[2]), tonumber(b[3]) + tonumber(b[4]), tonumber(b[5])
  if st == "in_progress" and done >= total then
    setStatus(bkey, bst, st, "finalizing")
    redis.call("HSET", bkey, "target", "completed", "finalizing_at", now)
    return true
  end
  if st == "cancelling" and leased <= 0 then
    setStatus(bkey, bst, st, "finalizing")
    redis.call("HSET", bkey, "target", "cancelled", "finalizing_at", now)
    return true
  end
  return false
end

-- Splits "batchId:000012" into the batch id and the index as a hash field ("12").
local function splitRid(rid)
  local bid, idx = string.match(rid, "^(.*):(%d+)$")
  return bid, tostring(tonumber(idx))
end

-- The request id of index i (types.ts requestId: index zero-padded to 6 digits).
local function rid(bid, i)
  return string.format("%s:%06d", bid, i)
end

-- A lease on request `r` was just removed from the leases zset: the request goes back to its model's queue with
-- its original enqueue score (keeping age and FIFO order) unless a result exists or the batch no longer runs, in
-- which case the batch may now be finalizing. Returns 1 when requeued, else 0.
local function returnLease(prefix, r, bst, now)
  local bid, idx = splitRid(r)
  local bkey = prefix .. "b:" .. bid
  local b = redis.call("HMGET", bkey, "status", "model", "enqueued_at")
  if not b[1] then return 0 end
  redis.call("HINCRBY", bkey, "leased", -1)
  if b[1] == "in_progress" and redis.call("HEXISTS", prefix .. "r:" .. bid, idx) == 0 then
    redis.call("ZADD", prefix .. "q:" .. b[2], b[3], r)
    return 1
  end
  maybeFinalizing(bkey, bst, now)
  return 0
end
