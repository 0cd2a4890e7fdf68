"""The misconception battery: wrong answers learners really give, and right ones written differently.

Each ``Case`` is a source snippet that defines an exercise's answer variable, run in the namespace
of its notebook's setup cell. ``says`` is a regular expression the verdict's message must match on
the second wrong try (nudge and detail): it names something the check computed from the run
(a step, a reply, a fence, a count), so a canned sentence cannot pass. ``tests/test_misconceptions.py``
runs every case; ``ACCEPTED`` lists answers that differ from the solution cell and must pass.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Case:
    """A wrong answer: its exercise, the misconception it shows, its source, what it must be told."""

    name: str
    misconception: str
    snippet: str
    says: str


# Shared bodies ---------------------------------------------------------------------------------

SLIDING_LUA = '''
SRC = """
local log, limit, window, now = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call("ZREMRANGEBYSCORE", log, "-inf", {low})
if redis.call("ZCARD", log) {cmp} limit then
    return 0
end
redis.call("ZADD", log, now, ARGV[4])
{expire}
return 1
"""


def my_sliding_allow(client, key, limit, window_ms, now_ms):
    return client.eval(SRC, 1, key, limit, window_ms, now_ms, uuid.uuid4().hex) == 1
'''


def sliding(
    low: str = "now - window", cmp: str = ">=", expire: str = 'redis.call("PEXPIRE", log, window)'
) -> str:
    """Return a sliding-window script answer with one part changed."""
    return SLIDING_LUA.replace("{low}", low).replace("{cmp}", cmp).replace("{expire}", expire)


SLIDING_WATCH_NO_RETRY = """
def my_sliding_allow(client, key, limit, window_ms, now_ms):
    with client.pipeline() as pipe:
        try:
            pipe.watch(key)
            if pipe.zcount(key, f"({now_ms - window_ms}", "+inf") >= limit:
                return False
            pipe.multi()
            pipe.zremrangebyscore(key, "-inf", now_ms - window_ms)
            pipe.zadd(key, {uuid.uuid4().hex: now_ms})
            pipe.pexpire(key, window_ms)
            pipe.execute()
            return True
        except redis.WatchError:
            return False  # aborted: refused, although a slot may be free
"""

RELEASE_SCRIPT = '''
SCRIPT = """
if redis.call("GET", KEYS[1]) == ARGV[1] then
    return redis.call("DEL", KEYS[1])
end
return 0
"""
'''

GET_OR_PUT = '''
MY_SCRIPT = """
local id = redis.call("HGET", KEYS[2], ARGV[1])
if id then return {found} end
id = {new_id}
redis.call("HSET", KEYS[1], id, ARGV[1])
redis.call("HSET", KEYS[2], ARGV[1], id)
return id
"""


def my_get_or_put(client, text, keys):
    {ret}client.eval(MY_SCRIPT, 3, *keys, text)
'''


def get_or_put(
    found: str = "tonumber(id)",
    new_id: str = 'redis.call("HINCRBY", KEYS[3], "last_id", 1)',
    ret: str = "return ",
) -> str:
    """Return a get-or-put script answer with one part changed."""
    return GET_OR_PUT.replace("{found}", found).replace("{new_id}", new_id).replace("{ret}", ret)


GET_OR_PUT_WATCH_NO_RETRY = """
def my_get_or_put(client, text, keys):
    found = client.hget(keys.index, text)
    if found is not None:
        return int(found)
    with client.pipeline() as pipe:
        pipe.watch(keys.index, keys.meta)
        new_id = int(pipe.hget(keys.meta, "last_id") or 0) + 1
        pipe.multi()
        pipe.hset(keys.meta, "last_id", new_id)
        pipe.hset(keys.ids, new_id, text)
        pipe.hset(keys.index, text, new_id)
        try:
            pipe.execute()
        except redis.WatchError:
            return None  # aborted, and never tried again
        return new_id
"""

FENCED = '''
FENCED = """
local seen = {seen}
if {refuse} then
    return 0
end
redis.call("SET", KEYS[1], ARGV[2])
redis.call("SET", KEYS[2], ARGV[1])
return 1
"""


def my_fenced_write(client, resource, fence_key, fence, value):
    {ret}client.eval(FENCED, 2, resource, fence_key, fence, value){tail}
'''


def fenced(
    seen: str = 'tonumber(redis.call("GET", KEYS[2]) or "0")',
    refuse: str = "tonumber(ARGV[1]) < seen",
    ret: str = "return ",
    tail: str = " == 1",
) -> str:
    """Return a fenced-write script answer with one part changed."""
    return (
        FENCED.replace("{seen}", seen)
        .replace("{refuse}", refuse)
        .replace("{ret}", ret)
        .replace("{tail}", tail)
    )


FENCED_CHECK_THEN_WRITE = """
def my_fenced_write(client, resource, fence_key, fence, value):
    if int(client.get(fence_key) or 0) > fence:
        return False
    client.mset({resource: value, fence_key: fence})
    return True
"""

FENCED_PYTHON_TEXT = """
def my_fenced_write(client, resource, fence_key, fence, value):
    if (client.get(fence_key) or "0") > str(fence):
        return False
    client.mset({resource: value, fence_key: fence})
    return True
"""

FENCED_WATCH_GIVES_UP = """
import redis


def my_fenced_write(client, resource, fence_key, fence, value):
    with client.pipeline() as pipe:
        try:
            pipe.watch(fence_key)
            if int(pipe.get(fence_key) or 0) > fence:
                return False
            pipe.multi()
            pipe.set(resource, value)
            pipe.set(fence_key, fence)
            pipe.execute()
            return True
        except redis.WatchError:
            return False  # the fence changed: gives up, although this fence may be the newest
"""

RELEASE_WATCH_READ_FIRST = """
import redis


def my_release(client, key, token):
    with client.pipeline() as pipe:
        while True:
            try:
                held = client.get(key)  # read before WATCH: a change before WATCH goes unseen
                pipe.watch(key)
                if held != token:
                    pipe.unwatch()
                    return False
                pipe.multi()
                pipe.delete(key)
                pipe.execute()
                return True
            except redis.WatchError:
                continue
"""

KILL = 'answer_2 = {{"loops, never wrote": {0}, "wrote one key, then loops": {1}}}'
CONVERT = 'answer_1 = {{"float": {0}, "array_with_hole": {1}, "named_fields": {2}}}'
PREDICT = (
    'my_prediction = {{"ABBA": {{"admitted": {0}, "counter": {1}}}, '
    '"AAB": {{"admitted": {2}, "counter": {3}}}}}'
)

# 08: a lock's take and release, with the take's body and the release's line filled in
CASE_REDIS_PY = """
def my_take(client, name):
    lock = client.lock(name, timeout=10)
    {take}


def my_release(lock):
    {release}
    return "released"


my_case = (my_take, my_release)
"""
REDIS_PY_TAKE = "return lock if lock.acquire(blocking=False) else None"
CASE_PRL = """
import redis_lock


def my_take(client, name):
    lock = redis_lock.Lock(client, name, expire=10)
    {take}


def my_release(lock):
    {release}
"""
CASE_PRL += "\n\nmy_case = (my_take, my_release)\n"
PRL_TAKE = "if lock.acquire(blocking=False):\n        return lock"
PRL_RELEASE = 'lock.release()\n    return "released"'

CASES = [
    # 00: predict AABB
    Case("00.aabb", "lost update where there is none", "predicted = 11", r"read '11'.*holds 12"),
    Case("00.aabb", "a number as text", "predicted = '12'", r"the string '12'"),
    Case("00.aabb", "a legitimate None", "predicted = None", r"None: give a whole number"),
    Case("00.aabb", "a truthy boolean", "predicted = True", r"not True/False"),
    Case(
        "00.aabb",
        "numpy's number that is not whole",
        "import numpy\npredicted = numpy.float64(11.5)",
        r"11\.5\)?: give a whole number",
    ),
    # 01: predict ABBA and AAB
    Case(
        "01.schedules",
        "numbers as text",
        PREDICT.format('"2"', '"6"', '"1"', '"5"'),
        r"ABBA admitted is the string '2'",
    ),
    Case(
        "01.schedules", "a legitimate None", PREDICT.format(2, 6, 1, "None"), r"AAB counter is None"
    ),
    Case(
        "01.schedules",
        "a truthy boolean",
        PREDICT.format("True", 6, 1, 5),
        r"ABBA admitted is True",
    ),
    Case(
        "01.schedules",
        "check at write (INCR refuses)",
        PREDICT.format(1, 5, 1, 5),
        r"ABBA: admitted 1 is off.*B GET \S+ -> '4'",
    ),
    Case(
        "01.schedules",
        "off by one: a rejected client still INCRs",
        PREDICT.format(2, 6, 1, 6),
        r"AAB: counter 6 is off.*A INCRBY \S+ 1 -> 5",
    ),
    # 01: the sliding window
    Case(
        "01.sliding",
        "the stub's four round trips",
        (
            "def my_sliding_allow(client, key, limit, window_ms, now_ms):\n"
            "    client.zremrangebyscore(key, '-inf', now_ms - window_ms)\n"
            "    if client.zcard(key) >= limit:\n"
            "        return False\n"
            "    client.zadd(key, {uuid.uuid4().hex: now_ms})\n"
            "    client.pexpire(key, window_ms)\n"
            "    return True\n"
        ),
        r"in [AB]+ A got True and B True",
    ),
    Case(
        "01.sliding",
        "WATCH without retry",
        SLIDING_WATCH_NO_RETRY,
        r"[AB]'s EXEC at step \d+ was aborted by [AB]'s write at step \d+",
    ),
    Case(
        "01.sliding", "off by one: > limit", sliding(cmp=">"), r"admitted \[True, True, True, True,"
    ),
    Case(
        "01.sliding",
        "off by one: the window keeps its oldest edge",
        sliding(low='"(" .. (now - window)'),
        r"admitted \[True, True, True, False, False",
    ),
    Case(
        "01.sliding",
        "numbers as text: the limit compared unconverted",
        sliding().replace("tonumber(ARGV[1])", "ARGV[1]"),
        r"compare",
    ),
    Case("01.sliding", "no TTL", sliding(expire=""), r"no TTL"),
    Case(
        "01.sliding",
        "a legitimate None: forgot the return",
        sliding().replace("    return client.eval", "    client.eval"),
        r"admitted \[None, None",
    ),
    # 02: your own release
    Case(
        "02.my_release",
        "blind DEL",
        ("def my_release(client, key, token):\n    return client.delete(key) == 1\n"),
        r"after your release it holds None, so it deleted another client's lock",
    ),
    Case(
        "02.my_release",
        "GET, compare, DEL (two round trips)",
        (
            "def my_release(client, key, token):\n"
            "    if client.get(key) == token:\n        return client.delete(key) == 1\n"
            "    return False\n"
        ),
        r"B took the lock at step \d+, and A's DEL \S+ at step \d+ \(reply 1\) removed it, "
        r"after A's GET \S+ at step \d+ \(reply 'tok-A'\)",
    ),
    Case(
        "02.my_release",
        "a legitimate None: forgot the return",
        RELEASE_SCRIPT
        + ("def my_release(client, key, token):\n    client.eval(SCRIPT, 1, key, token)\n"),
        r"return value \(another client's lock\) is None: answer True or False",
    ),
    Case(
        "02.my_release",
        "deleted, then says False",
        RELEASE_SCRIPT
        + (
            "def my_release(client, key, token):\n"
            "    return client.eval(SCRIPT, 1, key, token) == 0\n"
        ),
        r"kept another client's lock but returned True",
    ),
    # 02: which schedules break GET-compare-DEL
    Case(
        "02.schedules",
        "valid but harmless (A's GET misses)",
        "my_prediction = {'ATBA'}",
        r"ATBA keeps B's lock: A's GET \S+ at step 4 \(reply 'tok-B'\), so A did not delete",
    ),
    Case(
        "02.schedules",
        "valid but harmless (B never gets it)",
        "my_prediction = {'ABTA'}",
        r"ABTA keeps B's lock: B never took the lock: B's SET \S+ tok-B NX PX \d+ at step 2 "
        r"\(reply nil\)",
    ),
    Case(
        "02.schedules",
        "not a possible order",
        "my_prediction = {'AAAATB'}",
        r"AAAATB: not a possible order",
    ),
    Case(
        "02.schedules",
        "a legitimate None",
        "my_prediction = None",
        r"give a set of schedule strings",
    ),
    Case(
        "02.my_release",
        "WATCH, but the lock read before WATCH",
        RELEASE_WATCH_READ_FIRST,
        r"A's GET \S+ at step \d+ \(reply 'tok-A'\) ran before A's WATCH .*read the lock after "
        r"WATCH",
    ),
    Case("02.schedules", "only half the story", "my_prediction = set()", r"no schedule at all"),
    # 03: the fewest steps
    Case(
        "03.fewest_steps",
        "valid but harmless (one after the other)",
        "my_schedule = 'AAAAB'",
        r"A's lookup at step 1 missed, B's lookup at step 5 found id '1'",
    ),
    Case(
        "03.fewest_steps",
        "off by one: a step too many",
        "my_schedule = 'ABABABA'",
        r"breaks it after step 6",
    ),
    Case("03.fewest_steps", "a legitimate None", "my_schedule = None", r"not None"),
    Case("03.fewest_steps", "not workers A and B", "my_schedule = 'ABC'", r"not a schedule"),
    # 03: your own get-or-put
    Case(
        "03.get_or_put",
        "WATCH without retry",
        GET_OR_PUT_WATCH_NO_RETRY,
        r"\d+ of \d+ orders of two workers registering 'price' break the dictionary",
    ),
    Case(
        "03.get_or_put",
        "numbers as text: the id returned as a string",
        get_or_put(found="id"),
        r"gave ids \[1, 2, '1'\]",
    ),
    Case(
        "03.get_or_put",
        "off by one: ids from 0",
        get_or_put(new_id='redis.call("HLEN", KEYS[1])'),
        r"gave ids \[0, 1, 0\]",
    ),
    Case(
        "03.get_or_put",
        "a legitimate None: forgot the return",
        get_or_put(ret=""),
        r"gave ids \[None, None, None\]",
    ),
    Case(
        "03.get_or_put",
        "forgets to look up",
        get_or_put().replace(
            'local id = redis.call("HGET", KEYS[2], ARGV[1])\nif id then return tonumber(id) end\n',
            "local id\n",
        ),
        r"gave ids \[1, 2, 3\]",
    ),
    # 04: return conversions
    Case(
        "04.return_conversions",
        "a legitimate None",
        CONVERT.format(3, "[1, 2]", "None"),
        r"named_fields: you said None \(a NoneType\).*named_fields arrived as \[\]",
    ),
    Case(
        "04.return_conversions",
        "a number as text",
        CONVERT.format('"3"', "[1, 2]", "[]"),
        r"float: you said '3' \(a str\).*float arrived as 3 \(a int\)",
    ),
    Case(
        "04.return_conversions",
        "the float survives",
        CONVERT.format(3.99, "[1, 2]", "[]"),
        r"float arrived as 3 ",
    ),
    Case(
        "04.return_conversions",
        "off by one: the hole is skipped",
        CONVERT.format(3, "[1, 2, 4]", "[]"),
        r"array_with_hole arrived as \[1, 2\]",
    ),
    # 04: keys in one slot
    Case(
        "04.same_slot_keys",
        "a hash tag per key",
        'keys_42 = (lab.ns.tagged("bookings", "42"), lab.ns.tagged("waitlist", "42"))',
        r"slots \d+ and \d+ differ",
    ),
    Case(
        "04.same_slot_keys",
        "a legitimate None",
        "keys_42 = (None, None)",
        r"two different key names",
    ),
    Case(
        "04.same_slot_keys",
        "outside the run's prefix",
        'keys_42 = ("{show42}:bookings", "{show42}:waitlist")',
        r"lab.ns",
    ),
    Case(
        "04.same_slot_keys",
        "one key twice",
        'keys_42 = (lab.ns.tagged("show42", "bookings"),) * 2',
        r"two different key names",
    ),
    Case(
        "04.same_slot_keys",
        "one key for both",
        'keys_42 = lab.ns.tagged("show42", "both")',
        r"must be a pair",
    ),
    # 05: which replies to retry
    Case(
        "05.retryable",
        "retry a final answer",
        "retry_as_is = {'TimeoutError', 'SOLD_OUT'}",
        r"SOLD_OUT: the caller already has an answer \(\['SOLD_OUT'.*answered \['SOLD_OUT'",
    ),
    Case(
        "05.retryable",
        "never retry",
        "retry_as_is = set()",
        r"has 0 name\(s\).*TimeoutError the retry .* answered \['ALREADY_BOOKED'",
    ),
    Case("05.retryable", "a legitimate None", "retry_as_is = None", r"not None"),
    Case(
        "05.retryable",
        "one name as a string",
        "retry_as_is = 'TimeoutError'",
        r"the string 'TimeoutError'",
    ),
    # 06: the loop budget
    Case(
        "06.loop_budget",
        "off by one: one more",
        (
            "def max_loop(iterations_per_ms, budget_ms):\n"
            "    return int(iterations_per_ms * budget_ms) + 1\n"
        ),
        r"over the budget",
    ),
    Case(
        "06.loop_budget",
        "seconds for milliseconds",
        (
            "def max_loop(iterations_per_ms, budget_ms):\n"
            "    return int(iterations_per_ms * budget_ms * 1000)\n"
        ),
        r"= 422525000: that loop runs 10000 ms",
    ),
    Case(
        "06.loop_budget",
        "rounded up",
        (
            "def max_loop(iterations_per_ms, budget_ms):\n"
            "    return -int(-iterations_per_ms * budget_ms // 1)\n"
        ),
        r"max_loop\(3.5, 2\)|over",
    ),
    Case(
        "06.loop_budget",
        "a legitimate None: forgot the return",
        ("def max_loop(iterations_per_ms, budget_ms):\n    int(iterations_per_ms * budget_ms)\n"),
        r"returned None",
    ),
    # 06: SCRIPT KILL
    Case(
        "06.killable",
        "any script can be killed",
        KILL.format("True", "True"),
        r"'wrote one key, then loops': not what SCRIPT KILL did.*could not stop",
    ),
    Case("06.killable", "inverted", KILL.format("False", "True"), r"'loops, never wrote'"),
    Case(
        "06.killable",
        "a legitimate None",
        KILL.format("None", "None"),
        r"is None: answer True or False",
    ),
    Case(
        "06.killable",
        "words for booleans",
        KILL.format('"yes"', '"no"'),
        r"is 'yes': answer True or False",
    ),
    Case("06.killable", "truthy integers, inverted", KILL.format(0, 1), r"not what SCRIPT KILL"),
    # 06: partial writes
    Case(
        "06.partial_writes",
        "only plain commands",
        'answer_3 = {"pipeline of 16 SETs"}',
        r"1 of the 5 ways.*'pipeline of 4 scripts' wrote \d+ of 16",
    ),
    Case(
        "06.partial_writes",
        "a transaction rolls back, a script does not",
        'answer_3 = {"one script, 16 SETs"}',
        r"'one script, 16 SETs' wrote 16 of 16",
    ),
    Case("06.partial_writes", "a legitimate None", "answer_3 = None", r"not None"),
    Case(
        "06.partial_writes",
        "one name as a string",
        'answer_3 = "pipeline of 16 SETs"',
        r"the string 'pipeline of 16 SETs'",
    ),
    # 07: your own fenced write
    Case(
        "07.fenced_write",
        "numbers compared as text (Lua)",
        fenced(seen='redis.call("GET", KEYS[2])', refuse="seen and ARGV[1] < seen"),
        r"after fence 9 had written, the write with fence 10 was refused.*'10' sorts before '9'",
    ),
    Case(
        "07.fenced_write",
        "numbers compared as text (Python)",
        FENCED_PYTHON_TEXT,
        r"fence 10 was refused \(the resource holds 'nine'",
    ),
    Case(
        "07.fenced_write",
        "off by one: an equal fence refused",
        fenced(refuse="tonumber(ARGV[1]) <= seen"),
        r"could not write a second time",
    ),
    Case(
        "07.fenced_write",
        "check, then write (two round trips)",
        FENCED_CHECK_THEN_WRITE,
        r"in [AB]+: [AB]'s MSET .* at step \d+ .*ends with .*old",
    ),
    Case(
        "07.fenced_write",
        "WATCH without retry: gives up after WatchError",
        FENCED_WATCH_GIVES_UP,
        r"EXEC at step \d+ was aborted by .*read the fence again and try again",
    ),
    Case(
        "07.fenced_write",
        "a legitimate None: forgot the return",
        fenced(ret="", tail=""),
        r"return value is None: answer True or False",
    ),
    # 08: your own case file (a lock of the learner's choice)
    Case(
        "08.own_library",
        "acquire's answer ignored: the lock object is truthy",
        CASE_PRL.format(take="lock.acquire(blocking=False)\n    return lock", release=PRL_RELEASE),
        r"B's my_take returned a lock too: .*A's SET .* \(reply 'OK'\).*B's SET .* \(reply nil\)",
    ),
    Case(
        "08.own_library",
        "a blocking take (the context-manager habit)",
        CASE_REDIS_PY.format(take="lock.acquire()\n    return lock", release="lock.release()"),
        r"B's my_take never returned: it retried \d+ times.*blocking=False",
    ),
    Case(
        "08.own_library",
        "valid but harmless: a release that only says so",
        CASE_PRL.format(take=PRL_TAKE, release='return "released"'),
        r"after my_release \(which returned 'released'\), the lock's key lock:\{ex08\}:lock is "
        r"still there",
    ),
    Case(
        "08.own_library",
        "a blind release: DEL of the key, whoever holds it",
        CASE_REDIS_PY.format(take=REDIS_PY_TAKE, release="lock.redis.delete(lock.name)"),
        r"A's late release deleted B's lock in \d+ of \d+ schedules: in ATBA: .*A's DEL .*\(reply 1\)",
    ),
]

ACCEPTED = [
    Case("00.aabb", "a float that is a whole number", "predicted = 12.0", ""),
    Case("00.aabb", "numpy's whole number", "import numpy\npredicted = numpy.int64(12)", ""),
    Case("00.aabb", "a Decimal", "from decimal import Decimal\npredicted = Decimal('12')", ""),
    Case(
        "01.schedules",
        "numpy's and Decimal's whole numbers",
        "import numpy\nfrom decimal import Decimal\n"
        + PREDICT.format("numpy.int64(2)", "Decimal(6)", "numpy.float64(1.0)", "Decimal('5.0')"),
        "",
    ),
    Case(
        "04.return_conversions",
        "numpy's whole number for an integer reply",
        'import numpy\nanswer_1 = {"float": numpy.int64(3), "array_with_hole": [1, 2], '
        '"named_fields": []}',
        "",
    ),
    Case(
        "06.loop_budget",
        "numpy's floor (a whole float64)",
        "import numpy\n\n\ndef max_loop(iterations_per_ms, budget_ms):\n"
        "    return numpy.floor(iterations_per_ms * budget_ms)\n",
        "",
    ),
    Case(
        "06.killable",
        "numpy booleans",
        "import numpy\n" + KILL.format("numpy.True_", "numpy.False_"),
        "",
    ),
    Case(
        "02.my_release",
        "the script's 1/0 returned as it is",
        RELEASE_SCRIPT
        + ("def my_release(client, key, token):\n    return client.eval(SCRIPT, 1, key, token)\n"),
        "",
    ),
    Case("02.schedules", "a list, in lower case", "my_prediction = ['aatba']", ""),
    Case("03.fewest_steps", "B first, with spaces", "my_schedule = 'ba ba ba'", ""),
    Case(
        "04.same_slot_keys",
        "another hash tag, built with lab.key",
        'keys_42 = (lab.key("{42}:bookings"), lab.key("{42}:waitlist"))',
        "",
    ),
    Case("05.retryable", "a list", "retry_as_is = ['TimeoutError']", ""),
    Case("06.killable", "1/0 for True/False", KILL.format(1, 0), ""),
    Case(
        "06.partial_writes",
        "a list",
        'answer_3 = ["pipeline of 16 SETs", "pipeline of 4 scripts"]',
        "",
    ),
    Case("07.fenced_write", "the script's 1/0 returned as it is", fenced(tail=""), ""),
    Case(
        "07.fenced_write",
        "the fence kept in Lua as a number, compared with >",
        fenced(refuse="seen > tonumber(ARGV[1])"),
        "",
    ),
    Case(
        "08.own_library",
        "python-redis-lock as its README shows (a late release raises NotAcquired)",
        CASE_PRL.format(take=PRL_TAKE, release=PRL_RELEASE),
        "",
    ),
]
