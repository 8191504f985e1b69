--[[
  lock-release: gives up the leader lock if this holder has it.
  KEYS[1] lock key
  ARGV[1] holder id
  Returns 1 Released, -1 NotHolder (expired or taken by another).
]]
if redis.call("GET", KEYS[1]) == ARGV[1] then
  redis.call("DEL", KEYS[1])
  return 1
end
return -1
