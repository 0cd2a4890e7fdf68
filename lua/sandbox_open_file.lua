-- sandbox_open_file.lua: try to open a file for reading from inside a script (a real Redis refuses: there is no io).
-- Scripts run inside the server, on its single thread: a file or network access there would
-- stall every client and escape the data set's replication, so a real Redis removes io, require,
-- loadfile and dofile from the sandbox. Such work belongs in the application. The embedded
-- backend (fakeredis with lupa) is not sandboxed, and there the open succeeds. The file is only
-- opened and closed, never read or written. Reads no key and writes nothing.
-- KEYS     none (numkeys 0)
-- ARGV[1]  a file path to open read-only
-- Returns:
--   "opened"          the file was opened (and closed): this environment is NOT sandboxed.
--   "cannot open"     io exists but the open failed (no such file, no permission).
-- Errors (error replies "ERR sandbox_open_file: <code>: <detail>", or from the server):
--   invalid-arguments   ARGV[1] missing.
--   "Script attempted to access nonexistent global variable 'io'"   a real Redis: io is not there.

if ARGV[1] == nil then
    return redis.error_reply("ERR sandbox_open_file: invalid-arguments: expects a path in ARGV[1]")
end
local handle = io.open(ARGV[1], "r")
if handle == nil then
    return "cannot open"
end
handle:close()
return "opened"
