-- primer_count_visit.lua: count one visit unless the page's cap is reached (notebook 00's Lua primer).
-- The smallest script that reads like every later one: its key comes in KEYS, its argument in
-- ARGV (always strings: tonumber turns "12" into 12), it talks to Redis with redis.call, and it
-- returns a Lua table, which reaches the client as an array. Read, decide and write run as one
-- step on the server: no other client's command can fall between the GET and the INCR.
-- KEYS[1]  the visit counter: a string holding a decimal integer (absent = 0 visits)
-- ARGV[1]  the cap: most visits to count, a decimal integer 1..1000000 (digits only)
-- Returns: a two-element array {counted, visits}
--   {1, visits}   the visit was counted; visits = the counter after it (at most the cap).
--   {0, visits}   the cap is reached; nothing written; visits = the counter as it stands.
-- Errors (error replies "ERR primer_count_visit: <code>: <detail>"; nothing has been written):
--   invalid-arguments   not exactly 1 key and 1 argument, or the cap is not a decimal integer
--                       1..1000000.
--   invalid-counter     the counter holds a string that is not a canonical decimal integer
--                       (digits only, no sign, no leading zero, at most 15 digits).
--   WRONGTYPE           the counter key holds another type (hash, list, ...): Redis's own
--                       error, raised by GET.

local function fail(reason) return redis.error_reply("ERR primer_count_visit: " .. reason) end

if #KEYS ~= 1 or #ARGV ~= 1 or #ARGV[1] > 7 or not string.find(ARGV[1], "^[1-9]%d*$") then
    return fail("invalid-arguments: expects 1 key and a cap 1..1000000")
end
local cap = tonumber(ARGV[1])  -- ARGV[1] is the string "12"; tonumber makes it the number 12
if cap > 1000000 then
    return fail("invalid-arguments: expects 1 key and a cap 1..1000000")
end

local stored = redis.call("GET", KEYS[1])  -- a missing key arrives as false, not nil
local visits = 0
if stored then
    if #stored > 15 or not (stored == "0" or string.find(stored, "^[1-9]%d*$")) then
        return fail("invalid-counter: the counter is not a canonical decimal integer")
    end
    visits = tonumber(stored)
end
if visits >= cap then
    return {0, visits}  -- a Lua table: the client receives the array [0, visits]
end
return {1, redis.call("INCR", KEYS[1])}
