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
-- Errors (nothing is deleted):
--   ERR lock_release_checked: ...   wrong number of keys or arguments, or an empty token
--   WRONGTYPE lock_release_checked: ...   the key exists but is not a string, so it is not a lock
if #KEYS ~= 1 or #ARGV ~= 1 then
  return redis.error_reply('ERR lock_release_checked: expected 1 key and 1 argument (token), got '
    .. #KEYS .. ' keys and ' .. #ARGV .. ' arguments')
end
local token = ARGV[1]
if token == '' then
  return redis.error_reply('ERR lock_release_checked: the token must not be empty')
end

local current = redis.pcall('GET', KEYS[1])
if type(current) == 'table' and current.err then
  return redis.error_reply('WRONGTYPE lock_release_checked: the lock key holds a non-string value')
end
if current == false then
  return false
end
if current ~= token then
  return -1
end
redis.call('DEL', KEYS[1])
return 1
