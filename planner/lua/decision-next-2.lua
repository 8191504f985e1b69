--[[
  decision-next: the next decisionId, only for the current leader (a fencing token: ids only grow, and a planner that
  lost the lock cannot mint one).
  KEYS[1] lock key  KEYS[2] decision counter (<prefix>planner:decision)
  ARGV[1] holder id
  Returns the new id (≥ 1), or -1 NotHolder.
]]
if redis.call("GET", KEYS[1]) ~= ARGV[1] then return -1 end
return redis.call("INCR", KEYS[2])
