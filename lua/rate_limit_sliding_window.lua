-- rate_limit_sliding_window.lua: admit one request if fewer than `limit` were admitted in the last `window` ms (sliding-window log).
-- The solution to the sliding-window exercise of notebooks/01_get_then_incr.ipynb.
-- The log is a sorted set: one member per admitted request, scored by its time in ms. A request
-- at time `now` counts the members with score above now - window; there is no window boundary
-- at which a burst of 2 x limit can pass, as there is with a fixed window.
-- The caller passes the time (ARGV[3]) so that tests can drive the clock; all clients must then
-- share one clock. (Production code may use redis.call("TIME") instead.) Requests can reach the
-- server out of time order: entries stamped later than `now` count too, so a late request is
-- refused rather than let a window hold more than `limit`.
-- Every argument is validated and the request id checked before the first write; on status 2
-- nothing has been written.
-- KEYS[1]  the log: a sorted set of admitted request ids scored by time (ms); expires after `window` ms idle.
-- ARGV[1]  limit: requests allowed per window, a decimal integer 1..100000 (digits only, no leading zero).
-- ARGV[2]  window: the window's length in ms, a decimal integer 1..86400000 (one day), same syntax.
-- ARGV[3]  now: the request's time in ms, a decimal integer 0..9007199254740991, same syntax ("0" allowed).
-- ARGV[4]  request id: 1..128 bytes, unique per request (a member of the log).
-- Returns: a two-element array {status, value}
--   {1, count}                allowed: the request was logged; count = requests in the window, this one included.
--   {0, count}                rejected: `limit` requests already in the window; only expired entries were
--                             trimmed; count = requests in the window.
--   {2, "invalid-arguments"}  not exactly 1 key and 4 arguments, or an argument outside its syntax or range;
--                             nothing written.
--   {2, "duplicate-request"}  the request id is already in the log; nothing written.
-- Errors: a key of another type raises WRONGTYPE from ZSCORE (a Redis error reply, not a status:
--   the key collides with foreign data), before anything is written.
-- uses: integer_in

if #KEYS ~= 1 or #ARGV ~= 4 then
    return {2, "invalid-arguments"}
end
local limit = integer_in(ARGV[1], 1, 100000)
local window = integer_in(ARGV[2], 1, 86400000)
local now = integer_in(ARGV[3], 0, 9007199254740991)
local id = ARGV[4]
if limit == nil or window == nil or now == nil or #id < 1 or #id > 128 then
    return {2, "invalid-arguments"}
end

local key = KEYS[1]
if redis.call("ZSCORE", key, id) then  -- raises WRONGTYPE for a key of another type
    return {2, "duplicate-request"}
end
-- Entries at or before now - window have left the window. Trimming them is the only write a
-- rejected request makes, and it changes no answer this script can give.
redis.call("ZREMRANGEBYSCORE", key, "-inf", string.format("%.0f", now - window))
local count = redis.call("ZCARD", key)
if count >= limit then
    return {0, count}
end
redis.call("ZADD", key, ARGV[3], id)
redis.call("PEXPIRE", key, window)
return {1, count + 1}
