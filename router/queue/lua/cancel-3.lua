--[[
  cancel: validating/in_progress -> cancelling; waiting requests leave the queue, leased ones may still finish.
  With nothing leased the batch moves on to finalizing (target cancelled) at once.
  KEYS[1] batch hash  KEYS[2] results hash  KEYS[3] status counters
  ARGV[1] key prefix  ARGV[2] batch id  ARGV[3] now ms
  Returns 1 Ok, 2 Finalizing, -1 NoBatch, -5 WrongState (already finishing or finished).
]]
local b = redis.call("HMGET", KEYS[1], "status", "model", "total")
local st = b[1]
if not st then return NO_BATCH end
if st ~= "in_progress" and st ~= "validating" then return WRONG_STATE end
if b[2] then
  local q = ARGV[1] .. "q:" .. b[2]
  for i = 0, tonumber(b[3]) - 1 do
    if redis.call("HEXISTS", KEYS[2], i) == 0 then redis.call("ZREM", q, rid(ARGV[2], i)) end
  end
end
setStatus(KEYS[1], KEYS[3], st, "cancelling")
redis.call("HSET", KEYS[1], "cancelling_at", ARGV[3])
if maybeFinalizing(KEYS[1], KEYS[3], ARGV[3]) then return FINALIZING end
return OK
