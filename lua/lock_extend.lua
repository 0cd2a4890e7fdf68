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
-- uses: replies, integer_in, lock_call_error, get_string

local err = lock_call_error(KEYS, ARGV, 2, "2 arguments (token, ttl_ms)")
if err then return err end
local token, ttl_ms = ARGV[1], ARGV[2]
if integer_in(ttl_ms, 1, 999999999999) == nil then
    return fail("invalid-arguments: ttl_ms must be a positive integer of at most 12 digits, got "
        .. string.format("%q", string.sub(ttl_ms, 1, 40)))
end

local current
current, err = get_string(KEYS[1], "lock")
if err then return err end
if current ~= token then
    return 0
end
redis.call("PEXPIRE", KEYS[1], ttl_ms)
return 1
