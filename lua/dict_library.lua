#!lua name=racelab_dict
-- dict_library.lua: Function library racelab_dict; FCALL racelab_dict_get_or_put returns a string's id
-- in a shared string<->id dictionary, registering it if absent (the same logic as dict_get_or_put.lua).
-- Load it with FUNCTION LOAD (helpers.backend.scripts.load_library); remove it with FUNCTION DELETE racelab_dict.
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
-- Errors (error replies "ERR racelab_dict_get_or_put: <code>: <detail>"; nothing has been written):
--   invalid-arguments         not exactly 3 keys and 1 argument, two KEYS equal, or the KEYS
--                             not sharing one {hash tag}.
--   invalid-counter           meta's last_id is not a canonical decimal integer in 0..2^53-2.
--   inconsistent-dictionary   the hashes disagree (the index points at an id that does not hold
--                             the string, HLEN of ids or index differs from last_id, or the
--                             next id is already taken in ids): somebody wrote them without
--                             this script.
--   WRONGTYPE                 one of the keys exists and is not a hash; the reply is
--                             "WRONGTYPE racelab_dict_get_or_put: KEYS[<i>] holds a <type>, not a hash".

-- Redis code cannot include other code, so each "BEGIN shared" block is a byte-for-byte copy of
-- lua/_shared.lua, the same blocks that make up dict_get_or_put.lua (tests/test_lua_style.py
-- holds every copy to it): EVAL script and library answer alike, bar the name in the errors.

local function fail(reason) return redis.error_reply("ERR racelab_dict_get_or_put: " .. reason) end
local function wrong_type(reason) return redis.error_reply("WRONGTYPE racelab_dict_get_or_put: " .. reason) end

-- BEGIN shared: hash_tag
-- Return the content of key's hash tag as Redis Cluster computes it, or nil if it has none.
local function hash_tag(key)
    local open = string.find(key, "{", 1, true)
    if not open then return nil end
    local close = string.find(key, "}", open + 1, true)
    if not close or close == open + 1 then return nil end
    return string.sub(key, open + 1, close - 1)
end
-- END shared: hash_tag

-- BEGIN shared: integer_in
-- Return the number in text if text is a canonical decimal integer (digits only: no sign, no
-- leading zero, no exponent, no spaces) in lo..hi, else nil; hi must be at most 2^53-1. The
-- length check comes first: tonumber sees at most 16 digits, and every integer up to 2^53 is
-- exact in a Lua number (a longer or larger text is above hi anyway).
local function integer_in(text, lo, hi)
    if type(text) ~= "string" or #text > 16 or not (text == "0" or string.find(text, "^[1-9]%d*$")) then
        return nil
    end
    local n = tonumber(text)
    if n < lo or n > hi then return nil end
    return n
end
-- END shared: integer_in

-- BEGIN shared: key_type
-- Return the type of key as a string ("none" if it does not exist). TYPE answers with a status
-- reply, which reaches a script as a table {ok = "hash"}.
local function key_type(key)
    local t = redis.call("TYPE", key)
    if type(t) == "table" then t = t.ok end
    return t
end
-- END shared: key_type

-- BEGIN shared: dictionary_keys_error
-- Return an error reply unless keys = {ids, index, meta} are three distinct keys that share one
-- {hash tag} (invalid-arguments) and each holds a hash or nothing (WRONGTYPE); else nil.
-- Reads nothing but TYPE. Needs the script's fail and wrong_type, the shared hash_tag and key_type.
local function dictionary_keys_error(keys)
    local ids, index, meta = keys[1], keys[2], keys[3]
    if ids == index or ids == meta or index == meta then
        return fail("invalid-arguments: the 3 keys must be distinct")
    end
    local tag = hash_tag(ids)
    if tag == nil or hash_tag(index) ~= tag or hash_tag(meta) ~= tag then
        return fail("invalid-arguments: the 3 keys must share one hash tag, e.g. {dict:<name>}")
    end
    for i, key in ipairs(keys) do
        local t = key_type(key)
        if t ~= "hash" and t ~= "none" then
            return wrong_type("KEYS[" .. i .. "] holds a " .. t .. ", not a hash")
        end
    end
    return nil
end
-- END shared: dictionary_keys_error

-- BEGIN shared: dictionary_registered_id
-- Return text's id if the index holds text, nil if it does not; or nil and an
-- inconsistent-dictionary error reply if the index points at an id that does not hold text.
-- Needs the script's fail and the shared integer_in.
local function dictionary_registered_id(ids, index, text)
    local found = redis.call("HGET", index, text)
    if not found then
        return nil
    end
    local id = integer_in(found, 1, 9007199254740991)  -- ids are 1..2^53-1
    if id == nil or redis.call("HGET", ids, found) ~= text then
        return nil, fail("inconsistent-dictionary: the index points at an id that does not hold the string")
    end
    return id
end
-- END shared: dictionary_registered_id

-- BEGIN shared: dictionary_last_id
-- Return meta's last_id (0 if unset) after checking that ids and index hold that many fields; or
-- nil and an error reply: invalid-counter (last_id is not a decimal integer in 0..2^53-2, so one
-- more id might not be exact) or inconsistent-dictionary (an HLEN differs from last_id).
-- Needs the script's fail and the shared integer_in.
local function dictionary_last_id(ids, index, meta)
    local stored = redis.call("HGET", meta, "last_id")
    local last = 0
    if stored then
        last = integer_in(stored, 0, 9007199254740990)
        if last == nil then
            return nil, fail("invalid-counter: last_id must be a decimal integer in 0..2^53-2")
        end
    end
    if redis.call("HLEN", ids) ~= last or redis.call("HLEN", index) ~= last then
        return nil, fail("inconsistent-dictionary: HLEN of ids or index differs from last_id")
    end
    return last
end
-- END shared: dictionary_last_id

-- BEGIN shared: dictionary_get_or_put
-- Return the id of args[1] in the dictionary keys = {ids, index, meta}, registering the string
-- if it is absent; or an error reply, before anything is written (see dict_get_or_put.lua).
-- Needs the script's fail and the shared dictionary_keys_error, dictionary_registered_id and
-- dictionary_last_id.
local function dictionary_get_or_put(keys, args)
    if #keys ~= 3 or #args ~= 1 then
        return fail("invalid-arguments: expected 3 keys (ids, index, meta) and 1 argument (the string)")
    end
    local err = dictionary_keys_error(keys)
    if err then
        return err
    end
    local ids, index, meta = keys[1], keys[2], keys[3]
    local text = args[1]
    local id, last
    id, err = dictionary_registered_id(ids, index, text)
    if err then
        return err
    end
    if id then
        return id
    end
    last, err = dictionary_last_id(ids, index, meta)
    if err then
        return err
    end
    if redis.call("HEXISTS", ids, string.format("%d", last + 1)) == 1 then
        return fail("inconsistent-dictionary: the next id is already taken in ids")
    end
    id = redis.call("HINCRBY", meta, "last_id", 1)
    local field = string.format("%d", id)  -- "%d", not tostring: no exponent for large ids
    redis.call("HSET", ids, field, text)
    redis.call("HSET", index, text, field)
    return id
end
-- END shared: dictionary_get_or_put

redis.register_function{function_name = "racelab_dict_get_or_put", callback = dictionary_get_or_put}
