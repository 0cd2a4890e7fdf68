-- delivery_record_score.lua: record a player's latest score (SET KEYS[1] ARGV[1]) after checking it is an integer.
-- Used to show how a script reaches the server: SCRIPT LOAD returns the SHA1 of this exact text,
-- EVALSHA runs it by that SHA1, and the cache that holds it is volatile (SCRIPT FLUSH, restart,
-- failover). The notebook also splices values into this text to show what NOT to do: a value
-- written into the source makes a different script, and a different cache entry, per value.
-- KEYS[1]  the score: a string key
-- ARGV[1]  the score to record: a decimal integer 0..999999999 (digits only, no leading zero,
--          no sign); further arguments are ignored
-- Returns: "OK" (status reply), the score was recorded.
-- Errors (error replies "ERR delivery_record_score: <code>: <detail>"; nothing has been written):
--   invalid-arguments   not exactly 1 key, or ARGV[1] missing or not a decimal integer 0..999999999.
-- (SET replaces a key of any type, so there is no WRONGTYPE case.)

local score = ARGV[1]
if #KEYS ~= 1 or type(score) ~= "string" or #score > 9
    or not (score == "0" or string.find(score, "^[1-9]%d*$")) then
    return redis.error_reply("ERR delivery_record_score: invalid-arguments: expects 1 key and a score 0..999999999")
end
return redis.call("SET", KEYS[1], score)
