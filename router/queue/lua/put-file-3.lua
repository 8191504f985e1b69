--[[
  put-file: stores a file's content and metadata and indexes it, all at once.
  KEYS[1] metadata hash (<prefix>f:<id>)  KEYS[2] content string (<prefix>fd:<id>)  KEYS[3] file index zset (<prefix>files)
  ARGV[1] id  ARGV[2] bytes  ARGV[3] created_at ms  ARGV[4] filename  ARGV[5] purpose  ARGV[6] content  ARGV[7] owner
  Returns 1 Ok, -4 Exists.
]]
if redis.call("EXISTS", KEYS[1]) == 1 then return EXISTS end
redis.call("SET", KEYS[2], ARGV[6])
redis.call("HSET", KEYS[1], "id", ARGV[1], "bytes", ARGV[2], "created_at", ARGV[3], "filename", ARGV[4], "purpose", ARGV[5], "owner", ARGV[7])
redis.call("ZADD", KEYS[3], ARGV[3], ARGV[1])
return OK
