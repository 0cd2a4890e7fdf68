"""The register of known differences between the embedded backend and a real Redis that matter to the suite.

Each entry is pinned by a test of today's behaviour in tests/test_divergences.py (the test named
``test_<id>``), so a fakeredis or Redis upgrade that changes one is noticed; docs/divergences.md is
the same list for readers. A notebook that relies on one of these runs that cell only where it
behaves like Redis (check ``lab.kind`` / ``lab.caps``) or shows both backends.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Divergence:
    """One known difference: what, what each side does, and how the suite handles it."""

    id: str
    what: str
    embedded: str
    real: str
    handling: str
    server_defect: bool = False


DIVERGENCES: tuple[Divergence, ...] = (
    Divergence(
        "psetex_setex_getex_round_expiry",
        "PSETEX, SETEX and GETEX EX/PX set the expiry time",
        "rounded down to a whole second (the key can live up to 1 s less than asked)",
        "exact to the millisecond",
        "the suite uses SET ... PX/EX (exact on both); never PSETEX/SETEX/GETEX in timing demos",
    ),
    Divergence(
        "lua_not_sandboxed",
        "the Lua environment of EVAL scripts",
        "not sandboxed: os (with os.execute), io, require, loadstring, dofile exist",
        "sandboxed: io, require, loadstring, dofile are absent; reading an unknown global is an error",
        "notebook 05 runs the sandbox_* scripts on the backend and on a throwaway real server and shows both",
    ),
    Divergence(
        "lua_global_write_error_wording",
        "a script assigns a global variable",
        "error 'Script attempted to set global variables: x'",
        "error 'user_script:1: Attempt to modify a readonly table ...'",
        "both refuse; notebooks show the error class, not the text",
    ),
    Divergence(
        "lua_multiple_returns_crash",
        "a script ends with `return 1, 2`",
        "the Python client raises AssertionError (fakeredis cannot encode the tuple)",
        "the first value is returned (1)",
        "scripts return one value (a table when several)",
    ),
    Divergence(
        "lua_error_messages",
        "a script raises an error (error('x'), error({err=...}), a syntax error)",
        "'Error running script (call to f_<sha>): @user_script:?: ...' with a Python-side stack; "
        "error({err='CODE msg'}) loses its message",
        "'user_script:1: x script: <sha>, on @user_script:1.'; error({err=...}) keeps 'CODE msg'",
        "suite scripts return redis.error_reply(...) (same on both); never error({err=...})",
    ),
    Divergence(
        "lua_redis_call_error_location",
        "an error raised by redis.call inside a script",
        "the command's error text only under EVAL (under FCALL it adds the suffix, like Redis)",
        "the text plus ' script: <sha or function>, on @user_script:<line>.' (@user_function under FCALL)",
        "the differential tests strip the suffix; notebooks print only the error class or use pcall",
    ),
    Divergence(
        "lua_missing_libraries",
        "Lua libraries available to scripts",
        "cjson only: bit, struct and cmsgpack are nil",
        "bit, cjson, struct and cmsgpack",
        "suite scripts use none of bit/struct/cmsgpack",
    ),
    Divergence(
        "no_script_kill_no_busy",
        "a long-running script",
        "no time limit: it runs to the end and blocks every client (SCRIPT KILL is an unknown command)",
        "after busy-reply-threshold (5 s) other clients get BUSY; SCRIPT KILL stops a read-only script",
        "notebook 06 runs runaway scripts only on a scratch redis-server the suite starts",
    ),
    Divergence(
        "no_eval_ro",
        "EVAL_RO / EVALSHA_RO",
        "unknown command",
        "runs a read-only script",
        "cells check lab.caps.eval_ro and say so on embedded",
    ),
    Divergence(
        "no_info_config_object_debug",
        "INFO, CONFIG GET/SET, OBJECT, DEBUG",
        "unknown commands",
        "available",
        "the backend reads the version from the FakeServer; such cells need a real server",
    ),
    Divergence(
        "no_wait",
        "WAIT numreplicas timeout",
        "unknown command",
        "waits until that many replicas acknowledged the writes, or the timeout",
        "only throwaway real servers with a replica run WAIT (notebook 07, Going further); the "
        "explorer's WAIT test skips on embedded",
    ),
    Divergence(
        "expire_option_error_wording",
        "EXPIRE/PEXPIRE with conflicting or bad options",
        "'NX and XX, GT or LT ...' for GT+LT; a bad number is reported before a bad option",
        "'GT and LT options at the same time are not compatible'; options are checked first",
        "same error class on both; the differential tests compare the class and list the wording",
    ),
    Divergence(
        "argument_checked_before_type",
        "HINCRBY with a non-integer increment, ZADD with a non-float "
        "score, on a key of another type",
        "WRONGTYPE (the key's type is checked first)",
        "ERR value is not an integer / not a valid float (the argument is checked first)",
        "only error paths differ, and no notebook shows them; the differential tests accept exactly these",
    ),
    Divergence(
        "expiry_kept_as_float_seconds",
        "an absolute expiry near 2**63 ms (PXAT 9223372036854775807)",
        "stored as float seconds: PTTL comes back about 2 s off",
        "exact",
        "no notebook uses such expiries; the differential tests allow 2**-50 relative TTL error",
    ),
    Divergence(
        "set_ifdeq_bad_digest_get_double_reply",
        "SET k v IFDEQ|IFDNE <digest not 16 bytes> GET on an existing string key",
        "one reply: ERR must be exactly 16 hexadecimal characters",
        "two replies (the old value, then that error): the connection is off by one from then on; "
        "in MULTI the EXEC array shifts; in a script redis.call/pcall return the old value and the "
        "error is lost",
        "never send that form to a real server; the differential tests read every reply up to a "
        "sentinel and accept exactly that shape",
        server_defect=True,
    ),
)


def by_id(divergence_id: str) -> Divergence:
    """Return the register entry with this id (KeyError if none)."""
    for entry in DIVERGENCES:
        if entry.id == divergence_id:
            return entry
    raise KeyError(divergence_id)


def markdown_table() -> str:
    """Return the register as a markdown table (what / embedded / real / how the suite handles it)."""
    rows = [
        "| what | embedded (fakeredis) | real Redis | how the suite handles it |",
        "|---|---|---|---|",
    ]
    for d in DIVERGENCES:
        what = f"{d.what} **(Redis server defect)**" if d.server_defect else d.what
        cells = (
            c.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
            for c in (what, d.embedded, d.real, d.handling)
        )
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)
