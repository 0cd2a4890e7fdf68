-- lock_release.lua: release a lock only if it still holds the caller's token (compare-and-delete).
--
-- The minimal contract, the one in the Redis docs' SET page and in redis-py's Lock: GET the
-- key, compare it with the caller's token and DEL it only if they are equal, all inside one
-- script, so no other client's command can run between the check and the delete. A caller
-- whose lease has expired (and whose key may now hold another client's token) deletes nothing.
-- It cannot tell "my lease expired" from "somebody else holds it now": for that, see
-- lock_release_checked.lua.
--
-- KEYS[1]  the lock key
-- ARGV[1]  the caller's token (the value it wrote with SET key token NX PX ttl); non-empty
--
-- Returns:
--   1  the key held ARGV[1] and has been deleted: the lock is released
--   0  nothing deleted: the key is missing (lease expired, or already released) or holds
--      another token (another client owns the lock now)
-- Errors (error replies "ERR lock_release: <code>: <detail>"; nothing is deleted):
--   invalid-arguments   wrong number of keys or arguments, or an empty token
--   WRONGTYPE           the key exists but is not a string, so it is not a lock
--                       ("WRONGTYPE lock_release: the lock key holds a non-string value")

-- The checks are shared with lock_release_checked.lua and lock_extend.lua: Redis scripts cannot
-- include one another, so each "BEGIN shared" block is a byte-for-byte copy of lua/_shared.lua
-- (tests/test_lua_style.py holds every copy to it).

local function fail(reason) return redis.error_reply("ERR lock_release: " .. reason) end
local function wrong_type(reason) return redis.error_reply("WRONGTYPE lock_release: " .. reason) end

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
if current == ARGV[1] then
    redis.call("DEL", KEYS[1])
    return 1
end
return 0
