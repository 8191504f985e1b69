--[[
  activate: validating -> in_progress; requests 0..total-1 enter the model's queue with score = the batch's created_at
  (at most now): every batch's deadline is created_at + the one completion window, so the queue runs earliest
  deadline first across batches (issue 37), and the score is the age that promotion to priority 0 counts.
  KEYS[1] batch hash  KEYS[2] payload hash  KEYS[3] ready zset of the model (<prefix>q:<model>)  KEYS[4] status counters
  ARGV[1] batch id  ARGV[2] model  ARGV[3] total  ARGV[4] now ms
  Returns 1 Ok, -1 NoBatch, -2 BatchClosed (cancelled/expired meanwhile), -5 WrongState (not validating, or not all
  payloads staged).
]]
local st = redis.call("HGET", KEYS[1], "status")
if not st then return NO_BATCH end
if st == "finalizing" or st == "completed" or st == "failed" or st == "expired" or st == "cancelled" or st == "cancelling" then return BATCH_CLOSED end
if st ~= "validating" then return WRONG_STATE end
local total = tonumber(ARGV[3])
if redis.call("HLEN", KEYS[2]) < total then return WRONG_STATE end
local score = ARGV[4]
local created = redis.call("HGET", KEYS[1], "created_at")
if created and tonumber(created) < tonumber(score) then score = created end
setStatus(KEYS[1], KEYS[4], st, "in_progress")
redis.call("HSET", KEYS[1], "model", ARGV[2], "total", total, "enqueued_at", score, "in_progress_at", ARGV[4])
local args = {}
for i = 0, total - 1 do
  args[#args + 1] = score
  args[#args + 1] = rid(ARGV[1], i)
  if #args >= 1000 then
    redis.call("ZADD", KEYS[3], unpack(args))
    args = {}
  end
end
if #args > 0 then redis.call("ZADD", KEYS[3], unpack(args)) end
if total == 0 then
  setStatus(KEYS[1], KEYS[4], "in_progress", "finalizing")
  redis.call("HSET", KEYS[1], "target", "completed", "finalizing_at", ARGV[4])
end
return OK
