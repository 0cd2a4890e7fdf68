-- fenced_write.lua: write to a protected resource only with a fencing token no older than the newest seen.
-- The storage side of Kleppmann's fencing scheme. Every lock grant comes with a number from
-- a counter that only grows (INCR). The resource remembers the highest number that has
-- written to it and refuses any write carrying a smaller one, so a holder that paused, lost
-- its lease and woke up late cannot overwrite the work of the client that took the lock
-- after it. The same holder may write several times with the same number.
-- KEYS[1]  the protected resource (a string key; its value is replaced by the write)
-- KEYS[2]  the highest fencing token that has written to KEYS[1] (a string holding an integer)
--          Both keys must share a hash tag, e.g. {job}:resource and {job}:resource:fence.
-- ARGV[1]  the writer's fencing token: a positive integer of at most 15 digits
-- ARGV[2]  the value to write
-- Returns:
--   1  written: ARGV[1] >= the highest token seen; KEYS[1] = ARGV[2], KEYS[2] = ARGV[1]
--   0  refused: ARGV[1] is older than the highest token seen; nothing changed
-- Errors (error replies "ERR fenced_write: <code>: <detail>"; nothing is changed):
--   invalid-arguments   wrong number of keys or arguments, two equal keys or keys not sharing
--                       one {hash tag}, or a token that is not a positive integer of at most
--                       15 digits
--   WRONGTYPE           KEYS[1] is not a string, or KEYS[2] is not a string holding a token as
--                       this script writes it (a canonical positive integer: "007" is not one)
--                       ("WRONGTYPE fenced_write: the resource key holds a <type>, not a string",
--                       "... the fence key holds a non-string value", "... the fence key does
--                       not hold a fencing token")
-- uses: replies, one_slot, integer_in, key_type, get_string

if #KEYS ~= 2 or #ARGV ~= 2 then
    return fail("invalid-arguments: expected 2 keys (resource, fence) and 2 arguments (token, value), got "
        .. #KEYS .. " keys and " .. #ARGV .. " arguments")
end
if not one_slot(KEYS[1], KEYS[2]) then
    return fail("invalid-arguments: the resource and fence keys must differ and share one {hash tag}")
end
local token_text, value = ARGV[1], ARGV[2]
local token = integer_in(token_text, 1, 999999999999999)
if token == nil then
    return fail("invalid-arguments: the fencing token must be a positive integer of at most 15 digits, got "
        .. string.format("%q", string.sub(token_text, 1, 40)))
end

local resource_type = key_type(KEYS[1])
if resource_type ~= "none" and resource_type ~= "string" then
    return wrong_type("the resource key holds a " .. resource_type .. ", not a string")
end
local highest, err = get_string(KEYS[2], "fence")
if err then return err end
if highest ~= false then
    local seen = integer_in(highest, 1, 999999999999999)  -- as written: "007" is not one
    if seen == nil then
        return wrong_type("the fence key does not hold a fencing token")
    end
    if token < seen then
        return 0
    end
end
redis.call("SET", KEYS[1], value)
redis.call("SET", KEYS[2], token_text)
return 1
