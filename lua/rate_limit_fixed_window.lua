-- rate_limit_fixed_window.lua: admit one request if its fixed window is under the limit (check and count atomically).
-- The read, the comparison and the increment run as one script, so no other client's command
-- can fall between them: concurrent callers can never admit more than `limit` per window.
-- The window is fixed: its TTL is set on the first hit only (the hit that creates the counter)
-- and is never extended, so the window ends `window` seconds after its first request.
-- Every argument and the stored state are validated before the first write; on status 2
-- nothing has been written.
-- KEYS[1]  the window's counter: a string holding a decimal integer, created by the first hit.
-- ARGV[1]  limit: requests allowed per window, a decimal integer 1..1000000000
--          (digits only: no sign, no leading zero, no exponent, no decimal point, no spaces).
-- ARGV[2]  window: the window's length in seconds, a decimal integer 1..31536000 (365 days), same syntax.
-- Returns: a two-element array {status, value}
--   {1, count}                allowed: the counter was incremented; count = requests admitted
--                             in this window, this one included (1..limit).
--   {0, count}                rejected: the counter is already at (or above) the limit; nothing written;
--                             count = the counter's current value.
--   {2, "invalid-arguments"}  not exactly 1 key and 2 arguments, or limit/window is not a positive
--                             decimal integer within its maximum; nothing written.
--   {2, "invalid-counter"}    the counter holds a string that is not a canonical non-negative decimal
--                             integer <= 9007199254740991 (2^53-1); nothing written.
--   {2, "missing-ttl"}        the counter exists but has no TTL (a window that would never end); nothing written.
-- Errors: a key of another type (hash, list, ...) raises WRONGTYPE from GET: that is a Redis
--   error reply, not a status. It means the key name collides with foreign data, not that the
--   caller sent bad input; the caller must not treat it as "rejected".
-- uses: integer_in

local MAX_LIMIT = 1000000000
local MAX_WINDOW = 31536000
local MAX_COUNTER = 9007199254740991

if #KEYS ~= 1 or #ARGV ~= 2 then
    return {2, "invalid-arguments"}
end
local limit = integer_in(ARGV[1], 1, MAX_LIMIT)
local window = integer_in(ARGV[2], 1, MAX_WINDOW)
if limit == nil or window == nil then
    return {2, "invalid-arguments"}
end

local key = KEYS[1]
local stored = redis.call("GET", key)  -- raises WRONGTYPE for a non-string key
if stored == false then
    -- First hit: create the counter and its TTL in one write.
    redis.call("SET", key, "1", "EX", window)
    return {1, 1}
end

local count = integer_in(stored, 0, MAX_COUNTER)
if count == nil then
    return {2, "invalid-counter"}
end
if redis.call("PTTL", key) < 0 then
    return {2, "missing-ttl"}
end
if count >= limit then
    return {0, count}
end
return {1, redis.call("INCR", key)}
