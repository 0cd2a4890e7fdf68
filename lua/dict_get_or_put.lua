-- dict_get_or_put.lua: return a string's id in a shared string<->id dictionary, registering it if absent.
-- A dictionary is three hashes that share one hash tag {dict:<name>}, so a Redis Cluster keeps
-- them in one slot and one script may touch all three:
--   ids    id -> string   the dictionary that readers use (fields "1".."N")
--   index  string -> id   the reverse index: one HGET answers "is this string registered?"
--   meta   field last_id  the id counter (HINCRBY)
-- A string seen for the first time gets last_id + 1; every later call for the same string gets
-- the same id, so ids stay dense (1..N). Strings are binary-safe (any bytes, "" included). The
-- lookup, the HINCRBY and both HSETs run as one script, so concurrent callers can never give one
-- string two ids or one id two strings. Everything is validated before the first write.
-- dict_library.lua serves the same get_or_put as a Function (FCALL racelab_dict_get_or_put).
-- KEYS[1]  ids hash,   e.g. racelab:<notebook>:<run>:{dict:columns}:ids
-- KEYS[2]  index hash, e.g. racelab:<notebook>:<run>:{dict:columns}:index
-- KEYS[3]  meta hash,  e.g. racelab:<notebook>:<run>:{dict:columns}:meta (field last_id)
-- ARGV[1]  the string to look up or register (any bytes, may be empty)
-- Returns: always an integer: the string's id (>= 1), the existing one or last_id + 1 if new.
-- Errors (error replies "ERR dict_get_or_put: <code>: <detail>"; nothing has been written):
--   invalid-arguments         not exactly 3 keys and 1 argument, two KEYS equal, or the KEYS
--                             not sharing one {hash tag}.
--   invalid-counter           meta's last_id is not a canonical decimal integer in 0..2^53-2.
--   inconsistent-dictionary   the hashes disagree (the index points at an id that does not hold
--                             the string, HLEN of ids or index differs from last_id, or the next
--                             id is already taken in ids): somebody wrote them without this script.
--   WRONGTYPE                 a key exists and is not a hash
--                             ("WRONGTYPE dict_get_or_put: KEYS[<i>] holds a <type>, not a hash").
-- uses: replies, dictionary_call_error, dictionary_registered_id, dictionary_last_id

local function get_or_put(keys, args)
    local err = dictionary_call_error(keys, args, 1, "1 argument (the string)")
    if err then return err end
    local ids, index, meta = keys[1], keys[2], keys[3]
    local id, last
    id, err = dictionary_registered_id(ids, index, args[1])
    if err then return err end
    if id then
        return id  -- registered already: nothing to write
    end
    last, err = dictionary_last_id(ids, index, meta)
    if err then return err end
    if redis.call("HEXISTS", ids, string.format("%d", last + 1)) == 1 then
        return fail("inconsistent-dictionary: the next id is already taken in ids")
    end
    id = redis.call("HINCRBY", meta, "last_id", 1)
    local field = string.format("%d", id)  -- "%d", not tostring: no exponent for large ids
    redis.call("HSET", ids, field, args[1])
    redis.call("HSET", index, args[1], field)
    return id
end

return get_or_put(KEYS, ARGV)
