--[[
  plan-put: stores one plan report and keeps only the newest `keep` (by decisionId).
  KEYS[1] index sorted set (<prefix>plans), score = decisionId, member = report id
  KEYS[2] the report's key (<prefix>plans:<id>)
  ARGV[1] report id  ARGV[2] decisionId  ARGV[3] report JSON  ARGV[4] keep (≥ 1)  ARGV[5] report key prefix (<prefix>plans:)
  Returns 1 Ok, -1 BadArgs (decisionId or keep not a number).
  Old reports are deleted by keys built from ARGV[5] (single-node Redis, like the rest of tidegate's scripts).
]]
local score = tonumber(ARGV[2])
local keep = tonumber(ARGV[4])
if score == nil or keep == nil or keep < 1 then return -1 end
redis.call("SET", KEYS[2], ARGV[3])
redis.call("ZADD", KEYS[1], score, ARGV[1])
local n = redis.call("ZCARD", KEYS[1])
if n > keep then
  local old = redis.call("ZRANGE", KEYS[1], 0, n - keep - 1)
  for _, id in ipairs(old) do
    redis.call("DEL", ARGV[5] .. id)
  end
  redis.call("ZREMRANGEBYRANK", KEYS[1], 0, n - keep - 1)
end
return 1
