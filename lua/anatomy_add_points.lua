-- anatomy_add_points.lua: add a validated number of points to a player's score.
-- The model of argument checking: ARGV[1] is matched against a strict pattern (digits only, no
-- leading zero, at most 4 digits) before tonumber ever sees it, then range-checked. Bad input gets
-- a documented error reply and nothing is written. The score key must be absent or hold a
-- canonical integer; anything else is refused before the write, too.
-- KEYS[1]  the score: a string holding a decimal integer (created at 0 if absent)
-- ARGV[1]  points to add: a decimal integer 1..1000 (no sign, no leading zero, no exponent,
--          no decimal point, no spaces)
-- Returns: integer, the new score after adding the points.
-- Errors (error replies "ERR anatomy_add_points: <code>: <detail>"; nothing has been written):
--   invalid-arguments   not exactly 1 key and 1 argument.
--   invalid-points      ARGV[1] is not a decimal integer in 1..1000.
--   invalid-score       the score holds a string that is not a canonical integer in
--                       -(2^53-1)..2^53-1 (no leading zero or plus sign).
--   score-overflow      the score plus the points would exceed 2^53-1: INCRBY's reply reaches
--                       the script as a Lua number, exact only up to 2^53.
--   WRONGTYPE           the score key holds another type (hash, list, ...): Redis's own error,
--                       raised by GET.

local MAX_POINTS = 1000
local MAX_SCORE = 9007199254740991  -- 2^53-1
local function fail(reason) return redis.error_reply("ERR anatomy_add_points: " .. reason) end

if #KEYS ~= 1 or #ARGV ~= 1 then
    return fail("invalid-arguments: expects 1 key and 1 argument")
end
local text = ARGV[1]
if #text > 4 or not string.find(text, "^[1-9]%d*$") then
    return fail("invalid-points: points must be a decimal integer 1..1000")
end
local points = tonumber(text)
if points > MAX_POINTS then
    return fail("invalid-points: points must be a decimal integer 1..1000")
end
local stored = redis.call("GET", KEYS[1])  -- raises WRONGTYPE for a non-string key
if stored and stored ~= "0" and (#stored > 17 or not string.find(stored, "^%-?[1-9]%d*$")
    or math.abs(tonumber(stored)) > MAX_SCORE) then
    return fail("invalid-score: the score is not an integer in -(2^53-1)..2^53-1")
end
if stored and tonumber(stored) + points > MAX_SCORE then
    return fail("score-overflow: the new score would exceed 2^53-1")
end
return redis.call("INCRBY", KEYS[1], points)
