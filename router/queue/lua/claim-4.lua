--[[
  claim: leases up to max of the model's oldest waiting requests, to an owner when one is given.
  KEYS[1] ready zset of the model  KEYS[2] leases zset (<prefix>leases; score = lease end ms)  KEYS[3] lease owners hash
  KEYS[4] owners zset
  ARGV[1] key prefix  ARGV[2] max  ARGV[3] now ms  ARGV[4] lease ms  ARGV[5] owner token ("" = none)
  Returns a flat array: request id, enqueue score, payload, ... (empty when nothing waits, or the owner is not live).
  Batch and payload keys are derived from ARGV[1] (single-instance Redis, not Cluster).
]]
local owner = ARGV[5]
if owner ~= "" and not redis.call("ZSCORE", KEYS[4], owner) then return {} end
local popped = redis.call("ZPOPMIN", KEYS[1], tonumber(ARGV[2]))
local untilMs = tonumber(ARGV[3]) + tonumber(ARGV[4])
local out = {}
local leasedBy = {}
for i = 1, #popped, 2 do
  local r, score = popped[i], popped[i + 1]
  local bid, idx = splitRid(r)
  redis.call("ZADD", KEYS[2], untilMs, r)
  if owner ~= "" then redis.call("HSET", KEYS[3], r, owner) end
  leasedBy[bid] = (leasedBy[bid] or 0) + 1
  out[#out + 1] = r
  out[#out + 1] = score
  out[#out + 1] = redis.call("HGET", ARGV[1] .. "p:" .. bid, idx) or ""
end
for bid, n in pairs(leasedBy) do redis.call("HINCRBY", ARGV[1] .. "b:" .. bid, "leased", n) end
return out
