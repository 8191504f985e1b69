--[[
  delete-file: removes a file's metadata, content and index entry.
  KEYS[1] metadata hash  KEYS[2] content string  KEYS[3] file index zset
  ARGV[1] id
  Returns 1 Ok (deleted), -1 when no such file (NoBatch reused as "not found").
]]
if redis.call("DEL", KEYS[1]) == 0 then return NO_BATCH end
redis.call("DEL", KEYS[2])
redis.call("ZREM", KEYS[3], ARGV[1])
return OK
