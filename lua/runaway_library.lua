#!lua name=racelab_runaway
-- runaway_library.lua: Function library racelab_runaway: a read-only busy loop as a Function, to watch with FUNCTION STATS and stop with FUNCTION KILL.
-- While it loops the server serves nobody else; past busy-reply-threshold it answers other
-- clients BUSY, yet accepts FUNCTION STATS (which function runs, its command, for how long) and
-- FUNCTION KILL (it never writes, so it can be killed). Use only on a throwaway server.
-- FCALL racelab_runaway_spin 0 <iterations>   (or FCALL_RO: the function declares no-writes)
-- KEYS     none
-- ARGV[1]  iterations: a decimal integer 1..10^12 (digits only)
-- Returns: integer, the number of iterations done (= ARGV[1]).
-- Errors (error replies "ERR racelab_runaway_spin: <code>: <detail>", or from the server):
--   invalid-arguments   keys given, not exactly 1 argument, or iterations not 1..10^12.
--   "Script killed by user with SCRIPT KILL..."   killed (FUNCTION KILL) while looping.

redis.register_function{
    function_name = "racelab_runaway_spin",
    callback = function(keys, args)
        if #keys ~= 0 or #args ~= 1 or #args[1] > 13 or not string.find(args[1], "^[1-9]%d*$")
            or tonumber(args[1]) > 1e12 then
            return redis.error_reply("ERR racelab_runaway_spin: invalid-arguments: expects no key and iterations 1..10^12")
        end
        local n = tonumber(args[1])
        local x = 0
        for i = 1, n do
            x = x + i
        end
        return n
    end,
    flags = {"no-writes"},
}
