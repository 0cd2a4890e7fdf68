-- dict_get_or_put_batch.lua: return the ids of a batch of strings in a shared string<->id dictionary,
-- registering those that are absent, in one call (one round trip for the whole batch).
-- Same dictionary layout and rules as dict_get_or_put.lua (three hashes sharing one hash tag
-- {dict:<name>}): ids (id -> string), index (string -> id), meta (field last_id, the counter).
-- Strings are handled in ARGV order, so new strings get consecutive ids in that order; a string
-- repeated in the batch gets the same id each time. The whole batch runs atomically.
-- Every argument and the stored state are validated before the first write: on an error reply
-- nothing has been written.
-- KEYS[1]  ids hash,   e.g. racelab:<notebook>:<run>:{dict:columns}:ids
-- KEYS[2]  index hash, e.g. racelab:<notebook>:<run>:{dict:columns}:index
-- KEYS[3]  meta hash,  e.g. racelab:<notebook>:<run>:{dict:columns}:meta (field last_id)
-- ARGV[1..n]  the strings to look up or register (any bytes, may be empty), 1 <= n <= 10000
-- Returns: always an array of n integers: the id of ARGV[i] at position i.
-- Errors (error replies, each prefixed "<CODE> dict_get_or_put_batch: "; nothing has been written):
--   ERR invalid-arguments         not exactly 3 keys, not 1..10000 strings, two KEYS equal, or the
--                                 KEYS not sharing one {hash tag}.
--   ERR invalid-counter           meta's last_id is not a canonical decimal integer in 0..2^53-2,
--                                 or the batch would take ids past 2^53-1.
--   ERR inconsistent-dictionary   the hashes disagree (the index points at an id that does not hold
--                                 a string, HLEN of ids or index differs from last_id, or an id the
--                                 batch would assign is already taken in ids): somebody wrote them
--                                 without this script.
--   WRONGTYPE                     one of the keys exists and is not a hash.

-- Redis scripts cannot include one another, so the checks of dict_get_or_put.lua are repeated
-- here on purpose; tests/test_differential.py and the per-file tests hold all three to one contract.

local MAX_ID = 9007199254740991  -- 2^53-1: every integer up to it is exact in a Lua number

local function fail(code, reason)
    return redis.error_reply(code .. " dict_get_or_put_batch: " .. reason)
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

local MAX_BATCH = 10000

if #KEYS ~= 3 or #ARGV < 1 or #ARGV > MAX_BATCH then
    return fail("ERR", "invalid-arguments: expected 3 keys (ids, index, meta) and 1..10000 strings")
end
local ids, index, meta = KEYS[1], KEYS[2], KEYS[3]
if ids == index or ids == meta or index == meta then
    return fail("ERR", "invalid-arguments: the 3 keys must be distinct")
end
local tag = hash_tag(ids)
if tag == nil or hash_tag(index) ~= tag or hash_tag(meta) ~= tag then
    return fail("ERR", "invalid-arguments: the 3 keys must share one hash tag, e.g. {dict:<name>}")
end
for i, key in ipairs(KEYS) do
    local t = key_type(key)
    if t ~= "hash" and t ~= "none" then
        return fail("WRONGTYPE", "KEYS[" .. i .. "] holds a " .. t .. ", not a hash")
    end
end

-- Pass 1 (reads only): find the registered strings, check the state, plan the new ids.
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
local result, planned, new_texts = {}, {}, {}
for i, text in ipairs(ARGV) do
    local id = planned[text]
    if id == nil then
        local found = redis.call("HGET", index, text)
        if found then
            id = id_number(found)
            if id == nil or id < 1 or redis.call("HGET", ids, found) ~= text then
                return fail("ERR", "inconsistent-dictionary: the index points at an id that does not hold the string")
            end
        else
            id = last + #new_texts + 1
            new_texts[#new_texts + 1] = text
        end
        planned[text] = id
    end
    result[i] = id
end
if last + #new_texts > MAX_ID then
    return fail("ERR", "invalid-counter: the batch would take ids past 2^53-1")
end
for n = 1, #new_texts do
    if redis.call("HEXISTS", ids, string.format("%d", last + n)) == 1 then
        return fail("ERR", "inconsistent-dictionary: an id the batch would assign is already taken in ids")
    end
end

-- Pass 2 (writes): register the new strings in ARGV order.
for n, text in ipairs(new_texts) do
    local field = string.format("%d", last + n)  -- "%d", not tostring: no exponent for large ids
    redis.call("HSET", ids, field, text)
    redis.call("HSET", index, text, field)
end
if #new_texts > 0 then
    redis.call("HINCRBY", meta, "last_id", #new_texts)
end
return result
