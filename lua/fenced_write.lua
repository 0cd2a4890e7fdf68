-- fenced_write.lua: write to a protected resource only with a fencing token no older than the newest seen.
--
-- The storage side of Kleppmann's fencing scheme. Every lock grant comes with a number from
-- a counter that only grows (INCR). The resource remembers the highest number that has
-- written to it and refuses any write carrying a smaller one, so a holder that paused, lost
-- its lease and woke up late cannot overwrite the work of the client that took the lock
-- after it. The same holder may write several times with the same number.
--
-- KEYS[1]  the protected resource (a string key; its value is replaced by the write)
-- KEYS[2]  the highest fencing token that has written to KEYS[1] (a string holding an integer)
--          Both keys must share a hash tag, e.g. {job}:resource and {job}:resource:fence.
-- ARGV[1]  the writer's fencing token: a positive integer of at most 15 digits
-- ARGV[2]  the value to write
--
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

-- Redis scripts cannot include one another: each "BEGIN shared" block is a byte-for-byte copy of
-- lua/_shared.lua (tests/test_lua_style.py holds every copy to it).

local function fail(reason) return redis.error_reply("ERR fenced_write: " .. reason) end
local function wrong_type(reason) return redis.error_reply("WRONGTYPE fenced_write: " .. reason) end

-- BEGIN shared: hash_tag
-- Return the content of key's hash tag as Redis Cluster computes it, or nil if it has none.
local function hash_tag(key)
    local open = string.find(key, "{", 1, true)
    if not open then return nil end
    local close = string.find(key, "}", open + 1, true)
    if not close or close == open + 1 then return nil end
    return string.sub(key, open + 1, close - 1)
end
-- END shared: hash_tag

-- BEGIN shared: integer_in
-- Return the number in text if text is a canonical decimal integer (digits only: no sign, no
-- leading zero, no exponent, no spaces) in lo..hi, else nil; hi must be at most 2^53-1. The
-- length check comes first: tonumber sees at most 16 digits, and every integer up to 2^53 is
-- exact in a Lua number (a longer or larger text is above hi anyway).
local function integer_in(text, lo, hi)
    if type(text) ~= "string" or #text > 16 or not (text == "0" or string.find(text, "^[1-9]%d*$")) then
        return nil
    end
    local n = tonumber(text)
    if n < lo or n > hi then return nil end
    return n
end
-- END shared: integer_in

-- BEGIN shared: key_type
-- Return the type of key as a string ("none" if it does not exist). TYPE answers with a status
-- reply, which reaches a script as a table {ok = "hash"}.
local function key_type(key)
    local t = redis.call("TYPE", key)
    if type(t) == "table" then t = t.ok end
    return t
end
-- END shared: key_type

-- BEGIN shared: get_string
-- Return the string value of key (false if the key does not exist), or nil and a WRONGTYPE
-- error reply if the key holds another type; what names the key in the reply (e.g. "lock").
-- Needs the script's wrong_type.
local function get_string(key, what)
    local value = redis.pcall("GET", key)
    if type(value) == "table" and value.err then
        return nil, wrong_type("the " .. what .. " key holds a non-string value")
    end
    return value
end
-- END shared: get_string

if #KEYS ~= 2 or #ARGV ~= 2 then
    return fail("invalid-arguments: expected 2 keys (resource, fence) and 2 arguments (token, value), got "
        .. #KEYS .. " keys and " .. #ARGV .. " arguments")
end
if KEYS[1] == KEYS[2] or hash_tag(KEYS[1]) == nil or hash_tag(KEYS[1]) ~= hash_tag(KEYS[2]) then
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
if err then
    return err
end
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
