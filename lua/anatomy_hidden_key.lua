-- anatomy_hidden_key.lua: ANTI-PATTERN, kept to be demonstrated: writes a key the server was not told about.
-- The script writes KEYS[1], then writes a second key whose name it receives in ARGV[1] instead
-- of KEYS[2]. On one server this "works", which is why the bug survives development. In a Redis
-- Cluster the server routes and checks a script by its declared KEYS only, and what it does with
-- the hidden key depends on how the script is sent (Redis 7+, checked on 8.6):
--   same slot as KEYS[1] (same {hash tag})    accepted in every case below.
--   EVAL of this file as it is (no shebang)    accepted on the same node even from another slot;
--       a key on another node fails with "Script attempted to access a non local key in a cluster node".
--   EVAL with a "#!lua" first line, and every Function (FCALL)   a key from another slot fails
--       with "Script attempted to access keys that do not hash to the same slot", even on the same
--       node, unless the script declares flags=allow-cross-slot-keys ("#!lua flags=allow-cross-slot-keys",
--       or flags = {"allow-cross-slot-keys"} in redis.register_function); another node fails always.
-- A failure comes from the second SET, after the first write has happened (no rollback). ACL key
-- patterns and client-side routing cannot see the hidden key either. Never copy this: pass every
-- key in KEYS.
-- So that even this demonstration cannot write outside the caller's namespace, both names must
-- contain a "{" and share the text before it (e.g. "racelab:<notebook>:<run>:").
-- KEYS[1]  a string key with a hash tag, set to ARGV[2]
-- ARGV[1]  the name of a second key (the mistake: it belongs in KEYS[2]), set to ARGV[2];
--          it must start with KEYS[1]'s text before its first "{"
-- ARGV[2]  the value written to both keys (any string)
-- Returns:
--   "OK"                both keys were written (single server, or a cluster that accepts the hidden key, above).
-- Errors (error replies "ERR anatomy_hidden_key: <code>: <detail>", or from the server):
--   invalid-arguments   not exactly 1 key and 2 arguments, or the two names do not share the
--                       namespace before "{"; nothing written.
--   "Script attempted to access a non local key in a cluster node"   ARGV[1] lives on another
--                       cluster node; raised by the second SET, and KEYS[1] stays written.
--   "Script attempted to access keys that do not hash to the same slot"   sent with a "#!lua"
--                       shebang (or as a Function) without allow-cross-slot-keys, ARGV[1] in
--                       another slot; raised by the second SET, and KEYS[1] stays written.

local function namespace(name)
    local brace = string.find(name, "{", 1, true)
    return brace and string.sub(name, 1, brace - 1) or nil
end

if #KEYS ~= 1 or #ARGV ~= 2 or namespace(KEYS[1]) == nil or namespace(KEYS[1]) ~= namespace(ARGV[1]) then
    return redis.error_reply("ERR anatomy_hidden_key: invalid-arguments: expects 1 key and 2 arguments in one namespace")
end
redis.call("SET", KEYS[1], ARGV[2])
redis.call("SET", ARGV[1], ARGV[2])  -- the hidden key: the server cannot route or check it
return redis.status_reply("OK")
