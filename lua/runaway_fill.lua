-- runaway_fill.lua: write the same value into every key in KEYS (fills memory; for the maxmemory demo).
-- Redis notes once, when the EVAL (or the EXEC around it) arrives, whether the server is over
-- maxmemory, and checks that state at a script's first write that may grow memory: a script that
-- arrives under the limit runs to its end even if it crosses the limit midway (it cannot be
-- stopped halfway), and a script that arrives over the limit is refused at its first write.
-- KEYS[1..n]  string keys to set (1 or more)
-- ARGV[1]     the value (any string, may be large)
-- ARGV[2]     optional: a count 1..10^8 (digits only); the value written is ARGV[1] repeated that
--             many times, built inside the script (a 1 MB write from a few bytes of arguments)
-- Returns: integer, the number of keys written (= #KEYS).
-- Errors (error replies "ERR runaway_fill: <code>: <detail>", or from the server):
--   invalid-arguments   no key, not 1 or 2 arguments, or the count is not 1..10^8; nothing written.
--   OOM command not allowed when used memory > 'maxmemory'   the server was over maxmemory when
--                       the EVAL (or the EXEC around it) arrived; raised by the first SET, nothing
--                       written.

if #KEYS < 1 or #ARGV < 1 or #ARGV > 2 or (#ARGV == 2 and (#ARGV[2] > 9
    or not string.find(ARGV[2], "^[1-9]%d*$") or tonumber(ARGV[2]) > 1e8)) then
    return redis.error_reply("ERR runaway_fill: invalid-arguments: expects 1 or more keys, a value and an optional count 1..10^8")
end
local value = ARGV[1]
if #ARGV == 2 then
    value = string.rep(ARGV[1], tonumber(ARGV[2]))
end
for i = 1, #KEYS do
    redis.call("SET", KEYS[i], value)
end
return #KEYS
