--[[
  fail-validation: validating -> failed with the validation errors; staged payloads are dropped.
  KEYS[1] batch hash  KEYS[2] payload hash  KEYS[3] status counters  KEYS[4] active set
  ARGV[1] errors JSON  ARGV[2] now ms
  Returns 1 Ok, -1 NoBatch, -5 WrongState.
]]
local st = redis.call("HGET", KEYS[1], "status")
if not st then return NO_BATCH end
if st ~= "validating" then return WRONG_STATE end
setStatus(KEYS[1], KEYS[3], st, "failed")
redis.call("HSET", KEYS[1], "failed_at", ARGV[2], "errors", ARGV[1])
redis.call("DEL", KEYS[2])
redis.call("SREM", KEYS[4], redis.call("HGET", KEYS[1], "id"))
return OK
