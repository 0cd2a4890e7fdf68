#!lua name=racelab_demo
-- demo_library.lua: Function library racelab_demo: a hit counter with a writing function and a read-only one.
-- Load it with FUNCTION LOAD (helpers.backend.scripts.load_library), remove it with FUNCTION
-- DELETE racelab_demo. A loaded library is named, persisted and replicated: clients FCALL its
-- functions by name and never meet NOSCRIPT. racelab_demo_peek carries the `no-writes` flag, so
-- FCALL_RO (also on a read-only replica) may run it; it refuses racelab_demo_hit, which writes.
-- FCALL racelab_demo_hit 1 <counter> <amount>
-- FCALL racelab_demo_peek 1 <counter>    (or FCALL_RO)
-- KEYS[1]  the counter: a string holding a decimal integer (absent = 0)
-- ARGV[1]  racelab_demo_hit only: amount to add, a decimal integer 1..1000 (digits only)
-- Returns:
--   racelab_demo_hit   integer, the counter after adding the amount.
--   racelab_demo_peek  integer, the counter's value (0 if absent).
-- Errors ("ERR <function>: <code>: <detail>", <function> the FCALLed one; nothing written):
--   invalid-arguments   wrong number of keys/arguments, or the amount is not an integer 1..1000.
--   invalid-counter     the counter is not a canonical integer in -(2^53-1)..2^53-1 (exact in Lua).
--   counter-overflow    racelab_demo_hit only: the counter plus the amount would exceed 2^53-1.
--   WRONGTYPE           the counter key holds another type (Redis's own error, raised by GET).

local MAX_COUNTER = 9007199254740991  -- 2^53-1

-- Return the counter at key (0 if absent), or nil if it is not a canonical integer in
-- -(2^53-1)..2^53-1. GET raises WRONGTYPE for a key of another type.
local function read_counter(key)
    local stored = redis.call("GET", key)
    if stored == false then
        return 0
    end
    if stored ~= "0" and (#stored > 17 or not string.find(stored, "^%-?[1-9]%d*$")
        or math.abs(tonumber(stored)) > MAX_COUNTER) then
        return nil
    end
    return tonumber(stored)
end

local function hit(keys, args)
    if #keys ~= 1 or #args ~= 1 or #args[1] > 4 or not string.find(args[1], "^[1-9]%d*$")
        or tonumber(args[1]) > 1000 then
        return redis.error_reply("ERR racelab_demo_hit: invalid-arguments: expects 1 key and an amount 1..1000")
    end
    local counter = read_counter(keys[1])
    if counter == nil then
        return redis.error_reply("ERR racelab_demo_hit: invalid-counter: the counter is not an integer")
    end
    if counter + tonumber(args[1]) > MAX_COUNTER then
        return redis.error_reply("ERR racelab_demo_hit: counter-overflow: the counter would exceed 2^53-1")
    end
    return redis.call("INCRBY", keys[1], args[1])
end

local function peek(keys, args)
    if #keys ~= 1 or #args ~= 0 then
        return redis.error_reply("ERR racelab_demo_peek: invalid-arguments: expects 1 key and no argument")
    end
    return read_counter(keys[1])
        or redis.error_reply("ERR racelab_demo_peek: invalid-counter: the counter is not an integer")
end

redis.register_function("racelab_demo_hit", hit)
redis.register_function{function_name = "racelab_demo_peek", callback = peek, flags = {"no-writes"}}
