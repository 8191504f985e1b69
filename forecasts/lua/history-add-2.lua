--[[
  history-add: adds `delta` to one minute of one demand series (several recorders may add to the same minute).
  KEYS[1] day hash of the series (<prefix>hist:<kind>:<model>:<region>:<day>), field = minute of day (0..1439)
  KEYS[2] series index set (<prefix>hist:series), member = "<kind>\t<model>\t<region>"
  ARGV[1] minute of day  ARGV[2] delta (finite, ≥ 0)  ARGV[3] expiry of the day hash in seconds  ARGV[4] series member
  Returns 1 Ok, -1 BadValue (delta not a finite number ≥ 0), -2 BadMinute (minute not in 0..1439).
]]
local delta = tonumber(ARGV[2])
if delta == nil or delta ~= delta or delta < 0 or delta == math.huge then return -1 end
local minute = tonumber(ARGV[1])
if minute == nil or minute < 0 or minute > 1439 or minute % 1 ~= 0 then return -2 end
redis.call("HINCRBYFLOAT", KEYS[1], ARGV[1], ARGV[2])
redis.call("EXPIRE", KEYS[1], tonumber(ARGV[3]))
redis.call("SADD", KEYS[2], ARGV[4])
return 1
