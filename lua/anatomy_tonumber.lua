-- anatomy_tonumber.lua: show what Lua's tonumber makes of each ARGV string, and what a range check written with comparisons lets through.
-- Every ARGV arrives as a string; tonumber accepts far more than "a positive integer": exponents
-- ("1e3"), hex ("0x10"), fractions ("2.5"), signs ("-3"), surrounding spaces (" 7 "), and the C
-- library's specials: "nan", "inf", "-inf", and overflow ("1e400" becomes inf). NaN compares
-- false to everything, so the naive check `n == nil or n < 1 or n > 1000` refuses neither side of
-- it and lets "nan" through. Reads no key and writes nothing.
-- KEYS     none (numkeys 0)
-- ARGV[i]  any string to convert
-- Returns: an array with one pair per ARGV, in order: {number, naive}
--   number   "nil" if tonumber returned nil, else tostring(tonumber(ARGV[i])), e.g. "1000" for
--            "1e3", "nan" for "nan" (a string, so that a fraction is not truncated by the reply)
--   naive    "passes" or "refused": the verdict of `n == nil or n < 1 or n > 1000` -> refused
-- Errors: none.

local out = {}
for i = 1, #ARGV do
    local n = tonumber(ARGV[i])
    local naive = "passes"
    if n == nil or n < 1 or n > 1000 then
        naive = "refused"
    end
    out[i] = {tostring(n), naive}
end
return out
