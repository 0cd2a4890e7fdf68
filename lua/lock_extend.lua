-- lock_extend.lua: extend a lock's lease only while the caller still owns it (compare-and-expire).
--
-- A holder whose work runs long asks for more time before its lease ends. The script checks
-- the token and resets the time to live in one step, so it never extends a lock that has
-- expired and been taken by another client, and never brings an expired lock back to life.
-- The new lease is ARGV[2] milliseconds from now (it replaces the remaining time; it does not
-- add to it). On Redis >= 8.4 the native equivalent is SET key token IFEQ token PX ttl.
--
-- KEYS[1]  the lock key
-- ARGV[1]  the caller's token (the value it wrote with SET key token NX PX ttl); non-empty
-- ARGV[2]  the new lease in milliseconds: a positive integer of at most 12 digits
--
-- Returns:
--   1  the key held ARGV[1]; its time to live is now ARGV[2] ms
--   0  nothing changed: the key is missing (the lease already expired: too late to extend)
--      or holds another token (another client owns the lock now)
-- Errors (error replies "ERR lock_extend: <code>: <detail>"; nothing is changed):
--   invalid-arguments   wrong number of keys or arguments, an empty token, or a lease that is
--                       not a positive integer of at most 12 digits
--   WRONGTYPE           the key exists but is not a string, so it is not a lock
--                       ("WRONGTYPE lock_extend: the lock key holds a non-string value")

-- The checks are shared with lock_release.lua and lock_release_checked.lua: Redis scripts cannot
-- include one another, so each "BEGIN shared" block is a byte-for-byte copy of lua/_shared.lua
-- (tests/test_lua_style.py holds every copy to it).

local function fail(reason) return redis.error_reply("ERR lock_extend: " .. reason) end
local function wrong_type(reason) return redis.error_reply("WRONGTYPE lock_extend: " .. reason) end

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

-- BEGIN shared: lock_call_error
-- Return an invalid-arguments error reply unless keys holds 1 key (the lock) and args holds
-- n_args arguments (expected says which) of which the first, the caller's token, is not empty;
-- else nil. Needs the script's fail.
local function lock_call_error(keys, args, n_args, expected)
    if #keys ~= 1 or #args ~= n_args then
        return fail("invalid-arguments: expected 1 key and " .. expected .. ", got "
            .. #keys .. " keys and " .. #args .. " arguments")
    end
    if args[1] == "" then
        return fail("invalid-arguments: the token must not be empty")
    end
    return nil
end
-- END shared: lock_call_error

local err = lock_call_error(KEYS, ARGV, 2, "2 arguments (token, ttl_ms)")
if err then
    return err
end
local token, ttl_ms = ARGV[1], ARGV[2]
if integer_in(ttl_ms, 1, 999999999999) == nil then
    return fail("invalid-arguments: ttl_ms must be a positive integer of at most 12 digits, got "
        .. string.format("%q", string.sub(ttl_ms, 1, 40)))
end

local current
current, err = get_string(KEYS[1], "lock")
if err then
    return err
end
if current ~= token then
    return 0
end
redis.call("PEXPIRE", KEYS[1], ttl_ms)
return 1
