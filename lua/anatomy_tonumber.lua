-- anatomy_tonumber.lua: show what Lua's tonumber makes of each ARGV string, to motivate strict validation.
-- Every ARGV arrives as a string; tonumber accepts far more than "a positive integer": exponents
-- ("1e3"), hex ("0x10"), fractions ("2.5"), signs ("-3") and surrounding spaces (" 7 "). It returns
-- nil for text that is no number at all. Reads no key and writes nothing.
-- KEYS     none (numkeys 0)
-- ARGV[i]  any string to convert
-- Returns: an array with one entry per ARGV, in order:
--   "nil"        tonumber returned nil (not a number)
--   "<number>"   tostring(tonumber(ARGV[i])), e.g. "1000" for "1e3", "2.5" for "2.5"
--   (strings, so that a fraction is not truncated by the integer reply conversion)
-- Errors: none.

local out = {}
for i = 1, #ARGV do
    out[i] = tostring(tonumber(ARGV[i]))
end
return out
