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
-- uses: read_lock

local current, err = read_lock(KEYS, ARGV)
if err then return err end
if current == ARGV[1] then
    redis.call("DEL", KEYS[1])
    return 1
end
return 0
