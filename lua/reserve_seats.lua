-- reserve_seats.lua: reserve seats for a booking if enough are left; business outcomes are statuses, faults are errors.
-- It checks every argument and reads every key before its first write, so it writes both keys
-- (RESERVED) or nothing. The booking id is stored with its seats: a caller that lost the reply
-- may retry with the same id and gets ALREADY_BOOKED. Outcomes are final answers (a status
-- array); faults (a caller's bug, foreign data under our key names) are error replies: fix them.
-- KEYS[1]  seats left for the show: a string holding a decimal integer >= 0 (absent = not on sale)
-- KEYS[2]  bookings of the show: a hash booking id -> seats held; must share KEYS[1]'s {hash tag}
-- ARGV[1]  booking id: 1..64 characters of A-Z a-z 0-9 _ -
-- ARGV[2]  seats wanted: a decimal integer 1..10 (digits only)
-- Returns: a two-element array {status, number}
--   {"RESERVED", left}        the seats were taken; left = seats left after this booking.
--   {"SOLD_OUT", left}        fewer than ARGV[2] seats are left; nothing written.
--   {"ALREADY_BOOKED", held}  this booking id already holds `held` seats (a retry); nothing written.
--   {"NOT_ON_SALE", 0}        KEYS[1] does not exist; nothing written.
-- Errors (error replies "ERR reserve_seats: <code>: <detail>"; nothing has been written):
--   invalid-arguments     not exactly 2 keys and 2 arguments, or the keys do not share a {hash tag}.
--   invalid-booking-id    ARGV[1] is empty, longer than 64 or has another character.
--   invalid-seats         ARGV[2] is not a decimal integer 1..10.
--   corrupt-inventory     KEYS[1] is not an integer 0..2^53-1, or the booking's seats not 1..10.
--   WRONGTYPE             KEYS[1] is not a string or KEYS[2] not a hash (Redis's own error).
-- uses: replies, one_slot, integer_in

if #KEYS ~= 2 or #ARGV ~= 2 then
    return fail("invalid-arguments: expects 2 keys (seats left, bookings) and 2 arguments (booking id, seats)")
end
if not one_slot(KEYS[1], KEYS[2]) then
    return fail("invalid-arguments: the two keys must differ and share one {hash tag}")
end
local booking = ARGV[1]
if #booking < 1 or #booking > 64 or string.find(booking, "[^%w_%-]") then
    return fail("invalid-booking-id: 1..64 characters of A-Z a-z 0-9 _ -")
end
local wanted = integer_in(ARGV[2], 1, 10)
if wanted == nil then
    return fail("invalid-seats: seats must be a decimal integer 1..10")
end

-- Reads: each raises WRONGTYPE on foreign data, before anything is written.
local stored_left = redis.call("GET", KEYS[1])
local held = redis.call("HGET", KEYS[2], booking)
if stored_left == false then
    return {"NOT_ON_SALE", 0}
end
local left = integer_in(stored_left, 0, 9007199254740991)
if left == nil then
    return fail("corrupt-inventory: seats left is not a non-negative integer")
end
if held then
    local seats = integer_in(held, 1, 10)
    if seats == nil then
        return fail("corrupt-inventory: the booking's seats are not an integer 1..10")
    end
    return {"ALREADY_BOOKED", seats}
end
if wanted > left then
    return {"SOLD_OUT", left}
end

redis.call("HSET", KEYS[2], booking, wanted)  -- the first write: both always happen together
return {"RESERVED", redis.call("DECRBY", KEYS[1], wanted)}
