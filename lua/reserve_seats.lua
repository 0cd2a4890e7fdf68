-- reserve_seats.lua: reserve seats for a booking if enough are left; business outcomes are statuses, faults are errors.
-- Checks every argument and reads every key before its first write, so it either writes both
-- keys (RESERVED) or nothing at all. A booking id is recorded with its seats, which makes the
-- call idempotent: a caller that lost the reply (timeout) may retry with the same booking id and
-- gets ALREADY_BOOKED instead of a second reservation.
-- Business outcomes (final answers; show them to the user, never retry them blindly) come back as
-- a status array. Technical faults (a bug in the caller, or foreign data under our key names) come
-- back as error replies: they say nothing about seats, must be logged and fixed, not retried.
-- KEYS[1]  seats left for the show: a string holding a decimal integer >= 0 (absent = not on sale)
-- KEYS[2]  bookings of the show: a hash booking id -> seats held; must share KEYS[1]'s {hash tag}
-- ARGV[1]  booking id: 1..64 characters of A-Z a-z 0-9 _ -
-- ARGV[2]  seats wanted: a decimal integer 1..10 (digits only)
-- Returns: a two-element array {status, number}
--   {"RESERVED", left}        the seats were taken; left = seats left after this booking.
--   {"SOLD_OUT", left}        fewer than ARGV[2] seats are left; nothing written; left = seats left.
--   {"ALREADY_BOOKED", held}  this booking id already holds seats (a retry); nothing written;
--                             held = the seats it holds.
--   {"NOT_ON_SALE", 0}        KEYS[1] does not exist; nothing written.
-- Errors (error replies "ERR reserve_seats: <code>: <detail>"; nothing has been written):
--   invalid-arguments     not exactly 2 keys and 2 arguments, or the keys do not share a {hash tag}.
--   invalid-booking-id    ARGV[1] is empty, longer than 64 or has another character.
--   invalid-seats         ARGV[2] is not a decimal integer 1..10.
--   corrupt-inventory     KEYS[1] holds a string that is not a canonical integer 0..2^53-1, or
--                         the booking's stored seats are not an integer 1..10.
--   WRONGTYPE             KEYS[1] is not a string or KEYS[2] is not a hash (foreign data; Redis's
--                         own error, raised by GET or HGET).

-- Redis scripts cannot include one another: each "BEGIN shared" block is a byte-for-byte copy of
-- lua/_shared.lua (tests/test_lua_style.py holds every copy to it).

local MAX_SEATS = 10
local MAX_LEFT = 9007199254740991

local function fail(reason) return redis.error_reply("ERR reserve_seats: " .. reason) end

-- BEGIN shared: hash_tag
-- Return the content of key's hash tag as Redis Cluster computes it, or nil if it has none.
local function hash_tag(key)
    local open = string.find(key, "{", 1, true)
    if not open then return nil end
    local close = string.find(key, "}", open + 1, true)
    if not close or close == open + 1 then return nil end
    return string.sub(key, open + 1, close - 1)
end
-- END shared: hash_tag

-- BEGIN shared: integer_in
-- Return the number in text if text is a canonical decimal integer (digits only: no sign, no
-- leading zero, no exponent, no spaces) in lo..hi, else nil; hi must be at most 2^53-1. The
-- length check comes first: tonumber sees at most 16 digits, and every integer up to 2^53 is
-- exact in a Lua number (a longer or larger text is above hi anyway).
local function integer_in(text, lo, hi)
    if type(text) ~= "string" or #text > 16 or not (text == "0" or string.find(text, "^[1-9]%d*$")) then
        return nil
    end
    local n = tonumber(text)
    if n < lo or n > hi then return nil end
    return n
end
-- END shared: integer_in

if #KEYS ~= 2 or #ARGV ~= 2 then
    return fail("invalid-arguments: expects 2 keys (seats left, bookings) and 2 arguments (booking id, seats)")
end
local tag = hash_tag(KEYS[1])
if tag == nil or tag ~= hash_tag(KEYS[2]) or KEYS[1] == KEYS[2] then
    return fail("invalid-arguments: the two keys must differ and share one {hash tag}")
end
local booking = ARGV[1]
if #booking < 1 or #booking > 64 or string.find(booking, "[^%w_%-]") then
    return fail("invalid-booking-id: 1..64 characters of A-Z a-z 0-9 _ -")
end
local wanted = integer_in(ARGV[2], 1, MAX_SEATS)
if wanted == nil then
    return fail("invalid-seats: seats must be a decimal integer 1..10")
end

-- Reads: each raises WRONGTYPE on foreign data, before anything is written.
local stored_left = redis.call("GET", KEYS[1])
local held = redis.call("HGET", KEYS[2], booking)
if stored_left == false then
    return {"NOT_ON_SALE", 0}
end
local left = integer_in(stored_left, 0, MAX_LEFT)
if left == nil then
    return fail("corrupt-inventory: seats left is not a non-negative integer")
end
if held then
    local seats = integer_in(held, 1, MAX_SEATS)
    if seats == nil then
        return fail("corrupt-inventory: the booking's seats are not an integer 1..10")
    end
    return {"ALREADY_BOOKED", seats}
end
if wanted > left then
    return {"SOLD_OUT", left}
end

-- Writes: only now, and both always happen together.
redis.call("HSET", KEYS[2], booking, wanted)
return {"RESERVED", redis.call("DECRBY", KEYS[1], wanted)}
