--[[
  create-batch: a new batch in status `validating`.
  KEYS[1] batch hash (<prefix>b:<id>)   KEYS[2] batch index zset (<prefix>batches)
  KEYS[3] active set (<prefix>active)   KEYS[4] status counters hash (<prefix>bst)
  KEYS[5] the owner's batch index zset (<prefix>batches:o:<owner>)
  ARGV[1] id  ARGV[2] endpoint  ARGV[3] input_file_id  ARGV[4] completion_window  ARGV[5] metadata JSON ("" = null)
  ARGV[6] created_at ms  ARGV[7] expires_at ms  ARGV[8] owner (tenant)  ARGV[9] allowed models JSON ("" = all)
  ARGV[10] allowed regions JSON ("" = any)
  Returns 1 Ok, -4 Exists.
]]
if redis.call("EXISTS", KEYS[1]) == 1 then return EXISTS end
redis.call("HSET", KEYS[1], "id", ARGV[1], "endpoint", ARGV[2], "input_file_id", ARGV[3], "completion_window", ARGV[4],
  "metadata", ARGV[5], "created_at", ARGV[6], "expires_at", ARGV[7], "status", "validating",
  "total", 0, "completed", 0, "failed", 0, "leased", 0, "owner", ARGV[8], "allowed_models", ARGV[9],
  "allowed_regions", ARGV[10])
redis.call("ZADD", KEYS[2], ARGV[6], ARGV[1])
redis.call("ZADD", KEYS[5], ARGV[6], ARGV[1])
redis.call("SADD", KEYS[3], ARGV[1])
redis.call("HINCRBY", KEYS[4], "validating", 1)
return OK
