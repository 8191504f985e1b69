--[[
  lock-acquire: takes or renews the planner leader lock.
  KEYS[1] lock key (<prefix>planner:leader)
  ARGV[1] holder id  ARGV[2] expiry ms (> 0)
  Returns 1 Acquired (was free or expired), 2 Renewed (already held by this holder), -1 HeldByOther.
]]
local cur = redis.call("GET", KEYS[1])
if not cur then
  redis.call("SET", KEYS[1], ARGV[1], "PX", tonumber(ARGV[2]))
  return 1
end
if cur == ARGV[1] then
  redis.call("PEXPIRE", KEYS[1], tonumber(ARGV[2]))
  return 2
end
return -1
