--[[
  stage: stores request payloads of a validating batch (not yet claimable). Idempotent per index (first wins).
  KEYS[1] batch hash  KEYS[2] payload hash (<prefix>p:<id>)
  ARGV pairs: index, payload, index, payload, ...
  Returns 1 Ok, -1 NoBatch, -5 WrongState (not validating).
]]
local st = redis.call("HGET", KEYS[1], "status")
if not st then return NO_BATCH end
if st ~= "validating" then return WRONG_STATE end
for i = 1, #ARGV, 2 do redis.call("HSETNX", KEYS[2], ARGV[i], ARGV[i + 1]) end
return OK
