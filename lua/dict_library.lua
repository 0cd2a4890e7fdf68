#!lua name=racelab_dict
-- dict_library.lua: Function library racelab_dict; FCALL racelab_dict_get_or_put returns a string's id
-- in a shared string<->id dictionary, registering it if absent (the same logic as dict_get_or_put.lua).
-- Load it with FUNCTION LOAD (helpers.scripts.load_library); remove it with FUNCTION DELETE racelab_dict.
-- Unlike an EVAL script, a loaded library is named, persisted with the data set (RDB/AOF) and
-- replicated, so a client never gets NOSCRIPT after a restart or a failover.
-- A dictionary is three hashes that share one hash tag {dict:<name>}, so a Redis Cluster keeps
-- them in one slot and one script may touch all three:
--   ids    id -> string   the dictionary that readers use (fields "1".."N")
--   index  string -> id   the reverse index: one HGET answers "is this string registered?"
--   meta   field last_id  the id counter (HINCRBY)
-- A string seen for the first time gets last_id + 1; every later call for the same string gets
-- the same id. Ids stay dense (1..N for N strings). Strings are binary-safe: any bytes, the empty
-- string included. The lookup, the HINCRBY and both HSETs run as one script, so concurrent
-- callers can never give one string two ids or one id two strings.
-- Every argument and the stored state are validated before the first write: on an error reply
-- nothing has been written.
-- Call: FCALL racelab_dict_get_or_put 3 <ids> <index> <meta> <string>
-- KEYS[1]  ids hash,   e.g. racelab:<notebook>:<run>:{dict:columns}:ids
-- KEYS[2]  index hash, e.g. racelab:<notebook>:<run>:{dict:columns}:index
-- KEYS[3]  meta hash,  e.g. racelab:<notebook>:<run>:{dict:columns}:meta (field last_id)
-- ARGV[1]  the string to look up or register (any bytes, may be empty)
-- Returns: always an integer (never a string, never an array)
--   id >= 1   the string's id: the existing one, or last_id + 1 if this call registered it.
-- Errors (error replies, each prefixed "<CODE> racelab_dict_get_or_put: "; nothing has been written):
--   ERR invalid-arguments         not exactly 3 keys and 1 argument, two KEYS equal, or the KEYS
--                                 not sharing one {hash tag}.
--   ERR invalid-counter           meta's last_id is not a canonical decimal integer in 0..2^53-2.
--   ERR inconsistent-dictionary   the hashes disagree (the index points at an id that does not hold
--                                 the string, HLEN of ids or index differs from last_id, or the
--                                 next id is already taken in ids): somebody wrote them without
--                                 this script.
--   WRONGTYPE                     one of the keys exists and is not a hash.

-- Redis scripts cannot include one another, so the checks of dict_get_or_put.lua are repeated
-- here on purpose; tests/test_differential.py and the per-file tests hold all three to one contract.

local MAX_ID = 9007199254740991  -- 2^53-1: every integer up to it is exact in a Lua number

local function fail(code, reason)
    return redis.error_reply(code .. " racelab_dict_get_or_put: " .. reason)
end

-- Return the content of key's hash tag as Redis Cluster computes it, or nil if it has none.
local function hash_tag(key)
    local open = string.find(key, "{", 1, true)
    if not open then return nil end
    local close = string.find(key, "}", open + 1, true)
    if not close or close == open + 1 then return nil end
    return string.sub(key, open + 1, close - 1)
end

-- Return the number in text if it is a canonical decimal in 0..MAX_ID, else nil.
local function id_number(text)
    if type(text) ~= "string" or #text > 16 or not (text == "0" or string.find(text, "^[1-9]%d*$")) then
        return nil
    end
    local n = tonumber(text)
    if n > MAX_ID then return nil end
    return n
end

local function key_type(key)
    local t = redis.call("TYPE", key)
    if type(t) == "table" then t = t.ok end
    return t
end


-- keys = {ids, index, meta}, args = {string}; see the header for the contract.
local function get_or_put(keys, args)
    if #keys ~= 3 or #args ~= 1 then
        return fail("ERR", "invalid-arguments: expected 3 keys (ids, index, meta) and 1 argument (the string)")
    end
    local ids, index, meta = keys[1], keys[2], keys[3]
    if ids == index or ids == meta or index == meta then
        return fail("ERR", "invalid-arguments: the 3 keys must be distinct")
    end
    local tag = hash_tag(ids)
    if tag == nil or hash_tag(index) ~= tag or hash_tag(meta) ~= tag then
        return fail("ERR", "invalid-arguments: the 3 keys must share one hash tag, e.g. {dict:<name>}")
    end
    for i, key in ipairs(keys) do
        local t = key_type(key)
        if t ~= "hash" and t ~= "none" then
            return fail("WRONGTYPE", "KEYS[" .. i .. "] holds a " .. t .. ", not a hash")
        end
    end

    local text = args[1]
    local found = redis.call("HGET", index, text)
    if found then
        local id = id_number(found)
        if id == nil or id < 1 or redis.call("HGET", ids, found) ~= text then
            return fail("ERR", "inconsistent-dictionary: the index points at an id that does not hold the string")
        end
        return id
    end

    local stored = redis.call("HGET", meta, "last_id")
    local last = 0
    if stored then
        last = id_number(stored)
        if last == nil or last >= MAX_ID then
            return fail("ERR", "invalid-counter: last_id must be a decimal integer in 0..2^53-2")
        end
    end
    if redis.call("HLEN", ids) ~= last or redis.call("HLEN", index) ~= last then
        return fail("ERR", "inconsistent-dictionary: HLEN of ids or index differs from last_id")
    end
    if redis.call("HEXISTS", ids, string.format("%d", last + 1)) == 1 then
        return fail("ERR", "inconsistent-dictionary: the next id is already taken in ids")
    end

    local id = redis.call("HINCRBY", meta, "last_id", 1)
    local field = string.format("%d", id)  -- "%d", not tostring: no exponent for large ids
    redis.call("HSET", ids, field, text)
    redis.call("HSET", index, text, field)
    return id
end

redis.register_function{function_name = "racelab_dict_get_or_put", callback = get_or_put}
