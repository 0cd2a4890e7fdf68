-- oom_delete_then_set.lua: delete one key, then set another (a first write that cannot grow memory; for the maxmemory demo).
-- Without a "#!" first line, Redis checks maxmemory at the script's first write command that
-- may grow memory (SET), and only if no write ran before it. DEL cannot grow memory, so over the
-- limit it runs, and the SET after it is not checked: the script runs whole, further past the
-- limit. The same text behind a "#!lua" line is refused before it starts (nothing deleted),
-- unless that line declares flags=allow-oom.
-- KEYS[1]  the key to delete (absent is fine: DEL is a write command all the same)
-- KEYS[2]  the key to set
-- ARGV[1]  the value (any string)
-- Returns: integer, the number of keys DEL deleted (0 or 1); KEYS[2] then holds ARGV[1].
-- Errors (error replies "ERR oom_delete_then_set: <code>: <detail>", or from the server):
--   invalid-arguments   not exactly 2 keys and 1 argument; nothing written.
--   OOM command not allowed when used memory > 'maxmemory'   only behind a "#!lua" line without
--                       allow-oom, over the limit: refused before the script starts.

if #KEYS ~= 2 or #ARGV ~= 1 then
    return redis.error_reply("ERR oom_delete_then_set: invalid-arguments: expects 2 keys and 1 argument")
end
local deleted = redis.call("DEL", KEYS[1])
redis.call("SET", KEYS[2], ARGV[1])
return deleted
