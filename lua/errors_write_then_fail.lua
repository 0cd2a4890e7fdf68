-- errors_write_then_fail.lua: ANTI-PATTERN, kept to be demonstrated: writes first, fails second, keeps the first write.
-- Records an order (SET KEYS[1]) and then bumps a counter (INCR KEYS[2]). If the counter holds
-- something INCR refuses (a hash, or text like "many"), the INCR raises, the script stops, and the
-- order written a line earlier STAYS: Redis scripts have no rollback. The fix is to check every
-- input and every key's type/value before the first write (see reserve_seats.lua).
-- KEYS[1]  the order: a string key, set to ARGV[1]
-- KEYS[2]  the counter: a string holding an integer (created at 0 if absent)
-- ARGV[1]  the order's payload (any string)
-- Returns: integer, the counter's new value, when both writes succeeded.
-- Errors (error replies "ERR errors_write_then_fail: <code>: <detail>", or INCR's own):
--   invalid-arguments   not exactly 2 keys and 1 argument; nothing written.
--   <INCR's error>      WRONGTYPE or "ERR value is not an integer or out of range":
--                       raised AFTER the order was written, which stays written.

if #KEYS ~= 2 or #ARGV ~= 1 then
    return redis.error_reply("ERR errors_write_then_fail: invalid-arguments: expects 2 keys and 1 argument")
end
redis.call("SET", KEYS[1], ARGV[1])
return redis.call("INCR", KEYS[2])
