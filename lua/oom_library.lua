#!lua name=racelab_oom
-- oom_library.lua: Function library racelab_oom: one body (DEL, then SET) registered twice, with and without the allow-oom flag.
-- Functions declare flags, so Redis decides before a function starts: over maxmemory it refuses
-- racelab_oom_put whole (nothing deleted), and runs racelab_oom_put_anyway, which declares
-- allow-oom (its SET then grows memory further past the limit). Load the library while the
-- server is under the limit: FUNCTION LOAD itself is refused over it.
-- FCALL racelab_oom_put 2 <delete> <set> <value>
-- FCALL racelab_oom_put_anyway 2 <delete> <set> <value>
-- KEYS[1]  the key to delete (absent is fine)
-- KEYS[2]  the key to set
-- ARGV[1]  the value (any string)
-- Returns: integer, the number of keys DEL deleted (0 or 1); KEYS[2] then holds ARGV[1].
-- Errors (error replies "ERR <function>: <code>: <detail>", <function> being racelab_oom_put or
-- racelab_oom_put_anyway, or from the server):
--   invalid-arguments   not exactly 2 keys and 1 argument; nothing written.
--   OOM command not allowed when used memory > 'maxmemory'   racelab_oom_put only, over the
--                       limit: refused before it starts.

-- Delete keys[1], set keys[2] to args[1]; return what DEL returned (arguments checked by the caller).
local function delete_then_set(keys, args)
    local deleted = redis.call("DEL", keys[1])
    redis.call("SET", keys[2], args[1])
    return deleted
end

redis.register_function("racelab_oom_put", function(keys, args)
    if #keys ~= 2 or #args ~= 1 then
        return redis.error_reply("ERR racelab_oom_put: invalid-arguments: expects 2 keys and 1 argument")
    end
    return delete_then_set(keys, args)
end)
redis.register_function{
    function_name = "racelab_oom_put_anyway",
    callback = function(keys, args)
        if #keys ~= 2 or #args ~= 1 then
            return redis.error_reply("ERR racelab_oom_put_anyway: invalid-arguments: expects 2 keys and 1 argument")
        end
        return delete_then_set(keys, args)
    end,
    flags = {"allow-oom"},
}
