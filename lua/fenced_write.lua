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
-- Errors (nothing is changed):
--   ERR fenced_write: ...   wrong number of keys or arguments, two equal keys or keys not
--                           sharing one {hash tag}, or a token that is not a positive integer
--                           of at most 15 digits
--   WRONGTYPE fenced_write: ...   KEYS[1] is not a string, or KEYS[2] is not a string
--                                 holding an integer
if #KEYS ~= 2 or #ARGV ~= 2 then
  return redis.error_reply('ERR fenced_write: expected 2 keys (resource, fence) and 2 arguments (token, value), got '
    .. #KEYS .. ' keys and ' .. #ARGV .. ' arguments')
end
-- Return the content of key's hash tag as Redis Cluster computes it, or nil if it has none.
local function hash_tag(key)
  local open = string.find(key, '{', 1, true)
  if not open then return nil end
  local close = string.find(key, '}', open + 1, true)
  if not close or close == open + 1 then return nil end
  return string.sub(key, open + 1, close - 1)
end
if KEYS[1] == KEYS[2] or hash_tag(KEYS[1]) == nil or hash_tag(KEYS[1]) ~= hash_tag(KEYS[2]) then
  return redis.error_reply('ERR fenced_write: the resource and fence keys must differ and share one {hash tag}')
end
local token_text, value = ARGV[1], ARGV[2]
if not string.match(token_text, '^[1-9]%d*$') or #token_text > 15 then
  return redis.error_reply('ERR fenced_write: the fencing token must be a positive integer of at most 15 digits, got '
    .. string.format('%q', string.sub(token_text, 1, 40)))
end
local token = tonumber(token_text)

local resource_type = redis.call('TYPE', KEYS[1])['ok']
if resource_type ~= 'none' and resource_type ~= 'string' then
  return redis.error_reply('WRONGTYPE fenced_write: the resource key holds a ' .. resource_type .. ', not a string')
end
local highest = redis.pcall('GET', KEYS[2])
if type(highest) == 'table' and highest.err then
  return redis.error_reply('WRONGTYPE fenced_write: the fence key holds a non-string value')
end
if highest ~= false then
  if not string.match(highest, '^%d+$') or #highest > 15 then
    return redis.error_reply('WRONGTYPE fenced_write: the fence key does not hold a fencing token')
  end
  if token < tonumber(highest) then
    return 0
  end
end
redis.call('SET', KEYS[1], value)
redis.call('SET', KEYS[2], token_text)
return 1
