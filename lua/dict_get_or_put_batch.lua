-- dict_get_or_put_batch.lua: return the ids of a batch of strings in a shared string<->id dictionary,
-- registering those that are absent, in one call (one round trip for the whole batch).
-- The dictionary and its rules are dict_get_or_put.lua's. Strings are handled in ARGV order, so
-- new strings get consecutive ids in that order; a string repeated in the batch gets the same
-- id each time. The batch runs atomically; everything is validated before the first write.
-- KEYS[1]  ids hash, KEYS[2] index hash, KEYS[3] meta hash: as in dict_get_or_put.lua
-- ARGV[1..n]  the strings to look up or register (any bytes, may be empty), 1 <= n <= 10000
-- Returns: always an array of n integers: the id of ARGV[i] at position i.
-- Errors (error replies "ERR dict_get_or_put_batch: <code>: <detail>"; nothing has been written):
--   invalid-arguments         not 3 keys and 1..10000 strings, two KEYS equal, or no shared {hash tag}.
--   invalid-counter           last_id is not a canonical integer in 0..2^53-2, or the batch would pass 2^53-1.
--   inconsistent-dictionary   the hashes disagree (as in dict_get_or_put.lua, or an id the batch
--                             would assign is already taken in ids).
--   WRONGTYPE                 a key exists and is not a hash
--                             ("WRONGTYPE dict_get_or_put_batch: KEYS[<i>] holds a <type>, not a hash").
-- uses: replies, dictionary_call_error, dictionary_registered_id, dictionary_last_id

local MAX_ID = 9007199254740991  -- 2^53-1: every integer up to it is exact in a Lua number

local err = dictionary_call_error(KEYS, ARGV, 10000, "1..10000 strings")
if err then return err end
local ids, index, meta = KEYS[1], KEYS[2], KEYS[3]

-- Pass 1 (reads only): check the state, find the registered strings, plan the new ids.
local last
last, err = dictionary_last_id(ids, index, meta)
if err then return err end
local result, planned, new_texts = {}, {}, {}
for i, text in ipairs(ARGV) do
    local id = planned[text]
    if id == nil then
        id, err = dictionary_registered_id(ids, index, text)
        if err then return err end
        if id == nil then
            id = last + #new_texts + 1
            new_texts[#new_texts + 1] = text
        end
        planned[text] = id
    end
    result[i] = id
end
if last + #new_texts > MAX_ID then
    return fail("invalid-counter: the batch would take ids past 2^53-1")
end
for n = 1, #new_texts do
    if redis.call("HEXISTS", ids, string.format("%d", last + n)) == 1 then
        return fail("inconsistent-dictionary: an id the batch would assign is already taken in ids")
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
