-- sandbox_probe.lua: report the Lua version and which global names exist in the scripting environment.
-- A real Redis runs scripts in a sandbox: Lua 5.1 with no io, no require/loadfile/dofile, an os
-- table that holds only os.clock, and a global table that scripts cannot modify. The probe uses
-- rawget so that asking about a missing global does not raise Redis's "nonexistent global
-- variable" error. Reads no key and writes nothing.
-- KEYS     none (numkeys 0)
-- ARGV[i]  names of globals to look up (e.g. "io", "require", "os")
-- Returns: a three-element array {version, present, os_members}
--   version     _VERSION, e.g. "Lua 5.1"
--   present     an array with one entry per ARGV, in order: "yes" if rawget(_G, name) is not nil, else "no"
--   os_members  the sorted names in the os table (empty array if os is absent)
-- Errors: none.

local present = {}
for i = 1, #ARGV do
    present[i] = rawget(_G, ARGV[i]) ~= nil and "yes" or "no"
end
local os_members = {}
local os_table = rawget(_G, "os")
if type(os_table) == "table" then
    for name in pairs(os_table) do
        os_members[#os_members + 1] = name
    end
    table.sort(os_members)
end
return {_VERSION, present, os_members}
