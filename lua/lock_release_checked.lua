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
-- uses: read_lock

local current, err = read_lock(KEYS, ARGV)
if err then return err end
if current == false then
    return false
end
if current ~= ARGV[1] then
    return -1
end
redis.call("DEL", KEYS[1])
return 1
