-- anatomy_echo.lua: show what a script receives: numkeys, KEYS and ARGV, both 1-based.
-- Reads no key and writes nothing: it only reports how the client's EVAL arguments arrived.
-- EVAL <sha-or-source> <numkeys> <key 1> ... <key numkeys> <arg 1> ... <arg n>: the first
-- numkeys words after numkeys fill KEYS, the rest fill ARGV; both are Lua tables of strings
-- indexed from 1 (KEYS[1], ARGV[1]); KEYS[0] and ARGV[0] do not exist (nil).
-- KEYS[1..n]  any keys (none may be read or written; they are only echoed back)
-- ARGV[1..m]  any arguments (strings; a number sent by the client arrives as its decimal text)
-- Returns: always a four-element array {#KEYS, #ARGV, keys, args}
--   #KEYS   integer, the numkeys the client sent
--   #ARGV   integer, how many arguments followed the keys
--   keys    array of the KEYS in order (empty array if none)
--   args    array of the ARGV in order, as strings (empty array if none)
-- Errors: none raised by the script (the server rejects numkeys < 0 or > the number of words).

local keys, args = {}, {}
for i = 1, #KEYS do
    keys[i] = KEYS[i]
end
for i = 1, #ARGV do
    args[i] = ARGV[i]
end
return {#KEYS, #ARGV, keys, args}
