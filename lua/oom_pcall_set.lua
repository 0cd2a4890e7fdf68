-- oom_pcall_set.lua: SET one key through redis.pcall and answer whether the server refused it (catches OOM).
-- redis.call raises a server error out of the script (the caller gets the error reply);
-- redis.pcall returns it to the script as a table {err = "<message>"}, so the script decides.
-- Over maxmemory the SET is refused (OOM) and this script still returns normally.
-- KEYS[1]  the key to set
-- ARGV[1]  the value (any string)
-- Returns: a table {written, message}:
--   {1, "OK"}          the SET succeeded.
--   {0, "<error>"}     the server refused the SET, e.g. {0, "OOM command not allowed when used
--                      memory > 'maxmemory'."}; nothing written.
-- Errors (error replies "ERR oom_pcall_set: <code>: <detail>"):
--   invalid-arguments   not exactly 1 key and 1 argument; nothing written.

if #KEYS ~= 1 or #ARGV ~= 1 then
    return redis.error_reply("ERR oom_pcall_set: invalid-arguments: expects 1 key and 1 argument")
end
local reply = redis.pcall("SET", KEYS[1], ARGV[1])
if type(reply) == "table" and reply.err then
    return {0, reply.err}
end
return {1, reply.ok}
