--[[
  finalize: finalizing -> its target (completed / expired / cancelled) once the output and error files exist.
  KEYS[1] batch hash  KEYS[2] payload hash  KEYS[3] results hash  KEYS[4] active set  KEYS[5] status counters
  ARGV[1] batch id  ARGV[2] output file id ("" = none)  ARGV[3] error file id ("" = none)  ARGV[4] extra failed
  ARGV[5] now ms
  Returns 1 Ok, -1 NoBatch, -5 WrongState (not finalizing: another replica finalized first).
]]
local b = redis.call("HMGET", KEYS[1], "status", "target")
if not b[1] then return NO_BATCH end
if b[1] ~= "finalizing" or not b[2] then return WRONG_STATE end
local target = b[2]
setStatus(KEYS[1], KEYS[5], "finalizing", target)
redis.call("HDEL", KEYS[1], "target")
redis.call("HSET", KEYS[1], target .. "_at", ARGV[5])
if ARGV[2] ~= "" then redis.call("HSET", KEYS[1], "output_file_id", ARGV[2]) end
if ARGV[3] ~= "" then redis.call("HSET", KEYS[1], "error_file_id", ARGV[3]) end
redis.call("HINCRBY", KEYS[1], "failed", tonumber(ARGV[4]))
redis.call("DEL", KEYS[2], KEYS[3])
redis.call("SREM", KEYS[4], ARGV[1])
return OK
