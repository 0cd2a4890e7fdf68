#!lua name=racelab_dict
-- dict_library.lua: Function library racelab_dict; FCALL racelab_dict_get_or_put returns a string's id
-- in a shared string<->id dictionary, registering it if absent: dict_get_or_put.lua as a Function.
-- Load it with FUNCTION LOAD (helpers.backend.scripts.load_library); remove it with FUNCTION DELETE racelab_dict.
-- Unlike an EVAL script, a loaded library is named, replicated and saved with the data set, so a
-- client never gets NOSCRIPT after a failover, nor after a restart when RDB or AOF persistence is on.
-- The loader puts dict_get_or_put.lua in here, all but its last line (the EVAL entry point), so
-- the script and the library run the same get_or_put and answer alike, bar the name in errors.
-- Call: FCALL racelab_dict_get_or_put 3 <ids> <index> <meta> <string>
-- KEYS[1]  ids hash, KEYS[2] index hash, KEYS[3] meta hash: one {dict:<name>} tag (as the script)
-- ARGV[1]  the string to look up or register (any bytes, may be empty)
-- Returns: always an integer: the string's id (>= 1), the existing one or last_id + 1 if new.
-- Errors (error replies "ERR racelab_dict_get_or_put: <code>: <detail>"; nothing has been
-- written), each as in dict_get_or_put.lua:
--   invalid-arguments         not 3 keys and 1 argument, two KEYS equal, or no shared {hash tag}.
--   invalid-counter           meta's last_id is not a canonical decimal integer in 0..2^53-2.
--   inconsistent-dictionary   the hashes disagree: somebody wrote them without this code.
--   WRONGTYPE                 a key exists and is not a hash
--                             ("WRONGTYPE racelab_dict_get_or_put: KEYS[<i>] holds a <type>, not a hash").
-- uses: dict_get_or_put

SCRIPT = "racelab_dict_get_or_put"  -- the name in error replies: the function that FCALL calls
redis.register_function{function_name = SCRIPT, callback = get_or_put}
