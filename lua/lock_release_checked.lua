-- lock_release_checked.lua: release a lock if it holds the caller's token, and say why not otherwise.
--
-- The same compare-and-delete as lock_release.lua, in one script, with a richer reply: a
-- caller that could not release learns whether its lease simply ran out (the key is gone:
-- nobody else necessarily holds it) or whether another client holds the lock now (its work
-- may have overlapped with somebody else's and needs checking, retrying or reporting).
--
-- KEYS[1]  the lock key
-- ARGV[1]  the caller's token (the value it wrote with SET key token NX PX ttl); non-empty
--
-- Returns:
--   1    the key held ARGV[1] and has been deleted: the lock is released
--   nil  the key is missing: the caller's lease expired (or the lock was already released);
--        nothing deleted
--   -1   the key holds another token: another client owns the lock now; nothing deleted
-- Errors (error replies "ERR lock_release_checked: <code>: <detail>"; nothing is deleted):
--   invalid-arguments   wrong number of keys or arguments, or an empty token
--   WRONGTYPE           the key exists but is not a string, so it is not a lock
--                       ("WRONGTYPE lock_release_checked: the lock key holds a non-string value")

-- The checks are shared with lock_release.lua and lock_extend.lua: Redis scripts cannot include
-- one another, so each "BEGIN shared" block is a byte-for-byte copy of lua/_shared.lua
-- (tests/test_lua_style.py holds every copy to it).

local function fail(reason) return redis.error_reply("ERR lock_release_checked: " .. reason) end
local function wrong_type(reason) return redis.error_reply("WRONGTYPE lock_release_checked: " .. reason) end

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

-- BEGIN shared: read_lock
-- Check a release call (KEYS = {lock key}, ARGV = {token}) and read the lock. Return the value
-- the lock key holds (false if it does not exist), or nil and an error reply.
-- Needs the shared lock_call_error and get_string.
local function read_lock(keys, args)
    local err = lock_call_error(keys, args, 1, "1 argument (token)")
    if err then
        return nil, err
    end
    return get_string(keys[1], "lock")
end
-- END shared: read_lock

local current, err = read_lock(KEYS, ARGV)
if err then
    return err
end
if current == false then
    return false
end
if current ~= ARGV[1] then
    return -1
end
redis.call("DEL", KEYS[1])
return 1
