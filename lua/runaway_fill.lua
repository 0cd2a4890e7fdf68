-- runaway_fill.lua: write the same value into every key in KEYS (fills memory; for the maxmemory demo).
-- Redis checks maxmemory once, before a script's first write that may grow memory: a script
-- that starts under the limit runs to its end even if it crosses the limit midway (it cannot be
-- stopped halfway), and a script that starts over the limit is refused at its first write.
-- KEYS[1..n]  string keys to set (1 or more)
-- ARGV[1]     the value (any string, may be large)
-- Returns: integer, the number of keys written (= #KEYS).
-- Errors (error replies "ERR runaway_fill: <code>: <detail>", or from the server):
--   invalid-arguments   no key, or not exactly 1 argument; nothing written.
--   OOM command not allowed when used memory > 'maxmemory'   the server was over maxmemory when
--                       the script started; raised by the first SET, nothing written.

if #KEYS < 1 or #ARGV ~= 1 then
    return redis.error_reply("ERR runaway_fill: invalid-arguments: expects 1 or more keys and 1 argument")
end
for i = 1, #KEYS do
    redis.call("SET", KEYS[i], ARGV[1])
end
return #KEYS
