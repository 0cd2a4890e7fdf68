-- errors_call_vs_pcall.lua: the same failing command through redis.call and through redis.pcall.
-- The script runs INCR on KEYS[1]. When that fails (KEYS[1] holds a hash, or a string that is not
-- an integer), redis.call raises: the script stops and the client receives the error reply.
-- redis.pcall instead returns the error to the script as a table {err = "..."}, and the script
-- decides what to do; here it reports the error as data.
-- KEYS[1]  the key to INCR
-- ARGV[1]  "call" or "pcall": which API runs the INCR
-- Returns:
--   {"ok", n}          the INCR succeeded; n is the new value (both modes).
--   {"caught", msg}    pcall mode only: the INCR failed and msg is Redis's error text,
--                      e.g. "WRONGTYPE Operation against a key holding the wrong kind of value".
-- Errors (error replies "ERR errors_call_vs_pcall: <code>: <detail>", or INCR's own):
--   invalid-arguments    not exactly 1 key and 1 argument, or ARGV[1] is neither "call" nor "pcall".
--   <the INCR's error>   call mode: raised to the client (WRONGTYPE, "ERR value is not an integer ...").

if #KEYS ~= 1 or #ARGV ~= 1 or (ARGV[1] ~= "call" and ARGV[1] ~= "pcall") then
    return redis.error_reply("ERR errors_call_vs_pcall: invalid-arguments: expects 1 key and ARGV[1] = call|pcall")
end
if ARGV[1] == "call" then
    return {"ok", redis.call("INCR", KEYS[1])}
end
local reply = redis.pcall("INCR", KEYS[1])
if type(reply) == "table" and reply.err then
    return {"caught", reply.err}
end
return {"ok", reply}
