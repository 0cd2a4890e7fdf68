-- return_conversions.lua: return one Lua value, chosen by ARGV[1], to show how Redis converts it into a reply.
-- Reads no key and writes nothing. The conversions (RESP2) that the cases show:
--   nil -> nil reply; false -> nil reply; true -> integer 1; a number -> integer, fraction
--   truncated toward zero (3.99 -> 3, -3.99 -> -3); a string -> bulk string (a numeric string stays a
--   string); an array -> array reply that STOPS at the first nil (a hole cuts the rest);
--   a table with only named fields -> empty array; {ok = "..."} -> status reply;
--   {err = "..."} / redis.error_reply -> error reply.
-- KEYS     none (numkeys 0)
-- ARGV[1]  the case: nil | false | true | integer | float | negative_float | numeric_string |
--          array | array_with_hole | nested | named_fields | status | error
-- Returns: the value of the chosen case:
--   nil = nil; false = false; true = true; integer = 42; float = 3.99; negative_float = -3.99;
--   numeric_string = "3.99"; array = {1, 2, 3}; array_with_hole = {1, 2, nil, 4};
--   nested = {1, {"two", false}, "three"}; named_fields = {name = "x", size = 3};
--   status = {ok = "QUEUED-FOR-REVIEW"}; error = {err = "ERR_DEMO this is an error reply"}.
-- Errors (error replies "ERR return_conversions: <code>: <detail>"):
--   invalid-arguments   any key, or not exactly one argument.
--   unknown-case        ARGV[1] is not one of the cases above.

local CASES = {
    ["nil"] = function() return nil end,
    ["false"] = function() return false end,
    ["true"] = function() return true end,
    integer = function() return 42 end,
    float = function() return 3.99 end,
    negative_float = function() return -3.99 end,
    numeric_string = function() return "3.99" end,
    array = function() return {1, 2, 3} end,
    array_with_hole = function() return {1, 2, nil, 4} end,
    nested = function() return {1, {"two", false}, "three"} end,
    named_fields = function() return {name = "x", size = 3} end,
    status = function() return {ok = "QUEUED-FOR-REVIEW"} end,
    error = function() return {err = "ERR_DEMO this is an error reply"} end,
}
if #KEYS ~= 0 or #ARGV ~= 1 then
    return redis.error_reply("ERR return_conversions: invalid-arguments: expected no key and one argument, got "
        .. #KEYS .. " keys and " .. #ARGV .. " arguments")
end
local case = CASES[ARGV[1]]
if case == nil then
    return redis.error_reply("ERR return_conversions: unknown-case: see the file header for the cases")
end
return case()
