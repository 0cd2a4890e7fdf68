-- _shared.lua: the validators that several scripts share, each once; not a script.
-- Redis cannot make one script include another, so the loader does it (luaload.lua_source): a
-- script names the blocks it needs on its "-- uses: <name>, <name>" line, under its contract
-- header, and the loader puts those blocks there, between that line and the script's code, each
-- block after the blocks it uses itself. What Redis runs (and what the SHA is of) is that
-- assembled text; show("<script>", assembled=True) displays it.
-- A block runs from "-- BEGIN shared: <name>" to "-- END shared: <name>"; its own "-- uses:" line
-- names the blocks it needs. A block never builds an error reply itself: it calls fail(reason),
-- which replies "ERR <script>: <reason>", or wrong_type(reason), which replies
-- "WRONGTYPE <script>: <reason>", so every reply names the script (or library function) that
-- sent it. Both come from the replies block; the loader sets SCRIPT, the name, above it.
-- KEYS     none: this file is never sent with EVAL or FUNCTION LOAD.
-- ARGV     none.
-- Returns: nothing; a block only defines local functions and runs none of them.

-- BEGIN shared: replies
-- fail(reason) returns the error reply "ERR <SCRIPT>: <reason>", wrong_type(reason) the reply
-- "WRONGTYPE <SCRIPT>: <reason>". SCRIPT is the script's name (a library may rename it).
local function fail(reason) return redis.error_reply("ERR " .. SCRIPT .. ": " .. reason) end
local function wrong_type(reason) return redis.error_reply("WRONGTYPE " .. SCRIPT .. ": " .. reason) end
-- END shared: replies

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

-- BEGIN shared: one_slot
-- Return true if keys a and b differ and share one hash tag, so that a Redis Cluster keeps them
-- in one slot (where one script may touch both); else false.
-- uses: hash_tag
local function one_slot(a, b)
    local tag = hash_tag(a)
    return a ~= b and tag ~= nil and tag == hash_tag(b)
end
-- END shared: one_slot

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
-- uses: replies
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
-- else nil.
-- uses: replies
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
-- uses: lock_call_error, get_string
local function read_lock(keys, args)
    local err = lock_call_error(keys, args, 1, "1 argument (token)")
    if err then return nil, err end
    return get_string(keys[1], "lock")
end
-- END shared: read_lock

-- BEGIN shared: dictionary_call_error
-- Return an error reply unless keys = {ids, index, meta} are three distinct keys that share one
-- {hash tag} and args holds 1..max_args strings (invalid-arguments; expected says how many), and
-- each key holds a hash or nothing (WRONGTYPE); else nil. Reads nothing but TYPE.
-- uses: replies, hash_tag, key_type
local function dictionary_call_error(keys, args, max_args, expected)
    if #keys ~= 3 or #args < 1 or #args > max_args then
        return fail("invalid-arguments: expected 3 keys (ids, index, meta) and " .. expected)
    end
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
-- END shared: dictionary_call_error

-- BEGIN shared: dictionary_registered_id
-- Return text's id if the index holds text, nil if it does not; or nil and an
-- inconsistent-dictionary error reply if the index points at an id that does not hold text.
-- uses: replies, integer_in
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
-- uses: replies, integer_in
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
