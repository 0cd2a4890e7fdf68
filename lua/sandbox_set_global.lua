-- sandbox_set_global.lua: try to create a global variable, which the scripting sandbox refuses.
-- Scripts share one Lua state; a global left behind by one script would leak into the next, so
-- Redis forbids creating globals (use `local`). The assignment below always raises. Reads no key
-- and writes nothing.
-- KEYS     none (numkeys 0)
-- ARGV     none
-- Returns: never returns normally.
-- Errors: always an error reply; its text differs by server: Redis 7+ says "Attempt to modify a
--   readonly table", the embedded backend (fakeredis) says "Script attempted to set global variables".

leaked_counter = 1
return leaked_counter
