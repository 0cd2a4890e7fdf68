-- runaway_spin.lua: busy-loop for a given number of iterations, optionally after one write command (a runaway script on purpose).
-- While it loops, the single-threaded server serves nobody else. Past busy-reply-threshold
-- (default 5000 ms) other clients get "BUSY ..." replies; SCRIPT KILL can stop it only until it
-- calls a write command, even one that changes nothing (then only SHUTDOWN NOSAVE ends it).
-- Use only on a throwaway server.
-- KEYS[1]  a marker key: set to "started" in write mode, deleted in delete mode, else untouched
-- ARGV[1]  iterations: a decimal integer 1..10^12 (digits only)
-- ARGV[2]  "read" (no write), "write" (SET KEYS[1] first) or "delete" (DEL it first), then loop
-- Returns: integer, the number of iterations done (= ARGV[1]).
-- Errors (error replies "ERR runaway_spin: <code>: <detail>", or from the server):
--   invalid-arguments   not exactly 1 key and 2 arguments, iterations not 1..10^12, or the mode
--                       is not read, write or delete; nothing written.
--   "Script killed by user with SCRIPT KILL..."   read mode, killed while looping.

if #KEYS ~= 1 or #ARGV ~= 2 or #ARGV[1] > 13 or not string.find(ARGV[1], "^[1-9]%d*$")
    or tonumber(ARGV[1]) > 1e12 or (ARGV[2] ~= "read" and ARGV[2] ~= "write" and ARGV[2] ~= "delete") then
    return redis.error_reply("ERR runaway_spin: invalid-arguments: expects 1 key, iterations 1..10^12, read|write|delete")
end
local n = tonumber(ARGV[1])
if ARGV[2] == "write" then
    redis.call("SET", KEYS[1], "started")
elseif ARGV[2] == "delete" then
    redis.call("DEL", KEYS[1])
end
local x = 0
for i = 1, n do
    x = x + i
end
return n
