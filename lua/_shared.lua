-- _shared.lua: the canonical copies of the functions that several scripts share; not a script.
-- Redis cannot make one script include another, so a script that needs one of these functions
-- carries a byte-for-byte copy of its block, from the line "-- BEGIN shared: <name>" to the line
-- "-- END shared: <name>". To change a shared function, edit it here, then run
-- "python tests/test_lua_style.py --sync", which pastes every block over its copies;
-- tests/test_lua_style.py fails while any copy differs from this file.
-- A shared function never builds an error reply itself. It calls the script's own
-- fail(reason), which replies "ERR <script>: <reason>", or wrong_type(reason), which replies
-- "WRONGTYPE <script>: <reason>", so every reply names the script (or library function) that
-- sent it. A block names the other functions it needs; copy those blocks too, above it.
-- KEYS     none: this file is never sent with EVAL or FUNCTION LOAD.
-- ARGV     none.
-- Returns: nothing; loading the file only defines local functions and runs none of them.

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

-- BEGIN shared: get_string
-- Return the string value of key (false if the key does not exist), or nil and a WRONGTYPE
-- error reply if the key holds another type; what names the key in the reply (e.g. "lock").
-- Needs the script's wrong_type.
local function get_string(key, what)
    local value = redis.pcall("GET", key)
    if type(value) == "table" and value.err then
        return nil, wrong_type("the " .. what .. " key holds a non-string value")
    end
    return value
end
-- END shared: get_string

-- BEGIN shared: lock_call_error
-- Return an invalid-arguments error reply unless keys holds 1 key (the lock) and args holds
-- n_args arguments (expected says which) of which the first, the caller's token, is not empty;
-- else nil. Needs the script's fail.
local function lock_call_error(keys, args, n_args, expected)
    if #keys ~= 1 or #args ~= n_args then
        return fail("invalid-arguments: expected 1 key and " .. expected .. ", got "
            .. #keys .. " keys and " .. #args .. " arguments")
    end
    if args[1] == "" then
        return fail("invalid-arguments: the token must not be empty")
    end
    return nil
end
-- END shared: lock_call_error

-- BEGIN shared: read_lock
-- Check a release call (KEYS = {lock key}, ARGV = {token}) and read the lock. Return the value
-- the lock key holds (false if it does not exist), or nil and an error reply.
-- Needs the shared lock_call_error and get_string.
local function read_lock(keys, args)
    local err = lock_call_error(keys, args, 1, "1 argument (token)")
    if err then
        return nil, err
    end
    return get_string(keys[1], "lock")
end
-- END shared: read_lock

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
