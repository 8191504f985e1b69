--[[
  reclaim: owners whose heartbeat ended before now are dead: each is removed from the owners zset (fenced from then
  on) and every lease it holds goes back to its model's queue at once, with the request's original enqueue score,
  unless a result exists or the batch no longer runs (as release does). Reads the whole lease-owner hash, but only when
  an owner is dead.
  KEYS[1] owners zset  KEYS[2] leases zset  KEYS[3] lease owners hash  KEYS[4] status counters
  ARGV[1] key prefix  ARGV[2] now ms
  Returns {owners declared dead, their leases taken back, requeued}.
]]
local dead = redis.call("ZRANGEBYSCORE", KEYS[1], "-inf", "(" .. ARGV[2])
if #dead == 0 then return { 0, 0, 0 } end
local isDead = {}
for _, o in ipairs(dead) do
  isDead[o] = true
  redis.call("ZREM", KEYS[1], o)
end
local held = redis.call("HGETALL", KEYS[3])
local rids = {}
for i = 1, #held, 2 do
  if isDead[held[i + 1]] then rids[#rids + 1] = held[i] end
end
table.sort(rids)
local leases, requeued = 0, 0
for _, r in ipairs(rids) do
  redis.call("HDEL", KEYS[3], r)
  if redis.call("ZREM", KEYS[2], r) == 1 then
    leases = leases + 1
    requeued = requeued + returnLease(ARGV[1], r, KEYS[4], ARGV[2])
  end
end
return { #dead, leases, requeued }
