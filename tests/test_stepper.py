"""helpers.instruments.stepper: a learner writes the schedule one step at a time.

The known answers of the three races come out of the stepper on every backend: the naive limiter
with one slot left breaks on A, B, A, B; the blind DEL of a lock whose lease ran out breaks on
A, T, B, A; two get-or-puts of one text hand out two ids; the fixes stay green on every schedule.
"""

from __future__ import annotations

import threading
from functools import partial

import ipywidgets
import pytest

from helpers import Lab, Stepper, lease_expires
from helpers.instruments.explore import Exploration
from helpers.instruments.schedule import ScheduleError
from helpers.instruments.stepper import InvariantError

LIMIT = 5

# --- the strategies, as a notebook cell would define them -------------------------------------


def naive_allow(client, key: str, limit: int = LIMIT) -> bool:
    """GET, compare in Python, INCR: two clients can both read limit - 1."""
    if int(client.get(key) or 0) >= limit:
        return False
    client.incr(key)
    return True


def incr_first_allow(client, key: str, limit: int = LIMIT) -> bool:
    """INCR, then compare the value it returned: one round trip."""
    return client.incr(key) <= limit


LUA_ALLOW = """
local n = tonumber(redis.call("GET", KEYS[1]) or "0")
if n >= tonumber(ARGV[1]) then return 0 end
redis.call("INCR", KEYS[1])
return 1
"""


def lua_allow(client, key: str, limit: int = LIMIT) -> bool:
    """The check and the INCR in one EVAL: one round trip."""
    return client.eval(LUA_ALLOW, 1, key, limit) == 1


def hold_then_blind_del(client, key: str, token: str) -> str:
    """Take the lock (SET NX PX), then release it with a blind DEL."""
    if not client.set(key, token, nx=True, px=30_000):
        return "busy"
    client.delete(key)
    return "released"


RELEASE_IF_MINE = """
if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end
return 0
"""


def hold_then_checked_del(client, key: str, token: str) -> str:
    """Take the lock, then release it only if it still holds our token (one EVAL)."""
    if not client.set(key, token, nx=True, px=30_000):
        return "busy"
    return "released" if client.eval(RELEASE_IF_MINE, 1, key, token) == 1 else "not mine any more"


def take(client, key: str, token: str) -> str:
    """Take the lock and keep it."""
    return "holding" if client.set(key, token, nx=True, px=30_000) else "busy"


def naive_get_or_put(client, key: str, text: str) -> int:
    """HGET the text's id; if missing, HINCRBY a new id and HSET it: two clients can both miss."""
    found = client.hget(key, text)
    if found is not None:
        return int(found)
    new_id = client.hincrby(key, "#next", 1)
    client.hset(key, text, new_id)
    return new_id


GET_OR_PUT = """
local id = redis.call("HGET", KEYS[1], ARGV[1])
if id then return tonumber(id) end
id = redis.call("HINCRBY", KEYS[1], "#next", 1)
redis.call("HSET", KEYS[1], ARGV[1], id)
return id
"""


def lua_get_or_put(client, key: str, text: str) -> int:
    """HGET, HINCRBY and HSET in one EVAL."""
    return int(client.eval(GET_OR_PUT, 1, key, text))


# --- invariants -------------------------------------------------------------------------------


def limiter_invariant(key: str):
    def at_most_one_admitted(client, results) -> bool:
        """At most one of the two requests admitted (one slot was left)"""
        return list(results.values()).count(True) <= 1

    return at_most_one_admitted


def lock_invariant(key: str):
    def b_keeps_its_lock(client, results) -> bool:
        """If B took the lock, nobody removed it"""
        return results.get("B") != "holding" or client.get(key) == "tok-B"

    return b_keeps_its_lock


def dictionary_invariant(key: str, text: str):
    def one_id_per_text(client, results) -> bool:
        """Every client got the id the dictionary keeps for the text"""
        stored = client.hget(key, text)
        return all(stored is not None and int(stored) == r for r in results.values())

    return one_id_per_text


# --- stepper factories ----------------------------------------------------------------------


def limiter_stepper(lab: Lab, fn=naive_allow, **kwargs) -> Stepper:
    key = lab.key("demo")
    actor = partial(fn, key=key)
    return Stepper(
        lab,
        {"A": actor, "B": actor},
        setup=lambda c: c.set(key, LIMIT - 1),
        watch=[key],
        invariant=limiter_invariant(key),
        **kwargs,
    )


def lock_stepper(lab: Lab, holder=hold_then_blind_del) -> Stepper:
    key = lab.key("lock")
    actors = {
        "A": partial(holder, key=key, token="tok-A"),
        "T": lease_expires(key, value="tok-A"),
        "B": partial(take, key=key, token="tok-B"),
    }
    return Stepper(lab, actors, watch=[key], invariant=lock_invariant(key))


def dictionary_stepper(lab: Lab, fn=naive_get_or_put) -> Stepper:
    key = lab.key("dict")
    actor = partial(fn, key=key, text="price")
    return Stepper(
        lab, {"A": actor, "B": actor}, watch=[key], invariant=dictionary_invariant(key, "price")
    )


NAIVE_ABAB = """\
step  client  command        reply  state after  invariant
----------------------------------------------------------
              (setup)               demo=4       ok
   1  A       GET demo       '4'    demo=4       ok
   2  B       GET demo       '4'    demo=4       ok
   3  A       INCRBY demo 1  5      demo=5       ok
   4  B       INCRBY demo 1  6      demo=6       BROKEN
results: A -> True  B -> True
waiting: nobody: every client has finished
invariant (At most one of the two requests admitted (one slot was left)): BROKEN after step 4"""


# --- the rate limiter -----------------------------------------------------------------------


def test_naive_limiter_a_b_a_b_breaks_at_the_fourth_step(lab: Lab) -> None:
    with limiter_stepper(lab) as stepper:
        assert stepper.invariant_holds is True and stepper.waiting == {
            "A": "GET demo",
            "B": "GET demo",
        }
        row = stepper.step("A")
        assert (row.step, row.client, row.command, row.reply, row.state) == (
            1,
            "A",
            "GET demo",
            "'4'",
            "demo=4",
        )
        stepper.step("B")
        assert stepper.waiting == {"A": "INCRBY demo 1", "B": "INCRBY demo 1"}
        stepper.step("A")
        assert stepper.invariant_holds is True and stepper.results == {"A": True}
        stepper.step("B")
        assert stepper.invariant_holds is False and stepper.broken_at == 4
        assert stepper.verdicts == [True, True, True, True, False]
        assert (
            stepper.results == {"A": True, "B": True} and stepper.finished and stepper.waiting == {}
        )
        assert stepper.trace.schedule == "ABAB" and stepper.trace.final_state == "demo=6"
        assert str(stepper) == NAIVE_ABAB


def test_play_gives_the_static_trace_nbval_compares(lab: Lab) -> None:
    with limiter_stepper(lab) as stepper:
        assert stepper.play("ABAB") is stepper
        assert str(stepper) == NAIVE_ABAB
        bundle = stepper._repr_mimebundle_()
        assert bundle["text/plain"] == NAIVE_ABAB
        assert "application/vnd.jupyter.widget-view+json" in bundle
        page = bundle["text/html"]
        assert "INCRBY demo 1" in page and "BROKEN after step 4" in page and "#cf222e" in page
        assert lab.ns.prefix not in page and lab.ns.prefix not in NAIVE_ABAB


def test_naive_limiter_a_a_b_stays_green_because_b_reads_the_full_counter(lab: Lab) -> None:
    with limiter_stepper(lab) as stepper:
        stepper.play("AAB")
        assert stepper.results == {"A": True, "B": False} and stepper.finished
        assert stepper.invariant_holds is True and stepper.broken_at is None
        assert "holds after step 3" in str(stepper)


@pytest.mark.parametrize("fix", [lua_allow, incr_first_allow])
def test_limiter_fixes_stay_green_on_every_schedule(lab: Lab, fix) -> None:
    with limiter_stepper(lab, fix) as stepper:
        for schedule in ("AB", "BA"):
            stepper.play(schedule)
            assert stepper.verdicts == [True, True, True], schedule
            assert sorted(stepper.results.values()) == [False, True]
        stepper.reset()
        found = stepper.explore_from_here()
        assert (found.total, found.bad_count) == (2, 0)


def test_use_swaps_in_a_fix_that_stays_green_and_back(lab: Lab) -> None:
    key = lab.key("demo")
    fix = {"A": partial(lua_allow, key=key), "B": partial(lua_allow, key=key)}
    with limiter_stepper(lab, fixes={"Lua": fix}) as stepper:
        assert stepper.strategies == ["naive_allow", "Lua"] and stepper.strategy == "naive_allow"
        stepper.play("ABAB")
        assert stepper.invariant_holds is False
        assert str(stepper) == "strategy: naive_allow\n" + NAIVE_ABAB
        assert stepper.use("Lua") is stepper and stepper.steps == [] and stepper.strategy == "Lua"
        assert all(w.startswith("EVAL <script") for w in stepper.waiting.values())
        stepper.step("A")
        stepper.step("B")
        assert stepper.verdicts == [True, True, True] and stepper.results == {"A": True, "B": False}
        assert str(stepper).startswith("strategy: Lua\n")
        assert stepper.explore_from_here().bad_count == 0
        stepper.use("naive_allow")
        assert stepper.play("ABAB").broken_at == 4


def test_a_fix_must_name_known_actors_and_use_a_known_label(lab: Lab) -> None:
    key = lab.key("demo")
    with pytest.raises(ValueError, match="must replace some of the actors A, B, got C"):
        limiter_stepper(lab, fixes={"Lua": {"C": partial(lua_allow, key=key)}})
    with limiter_stepper(lab, fixes={"Lua": {"A": partial(lua_allow, key=key)}}) as stepper:
        with pytest.raises(ValueError, match="no strategy 'lua': choose one of naive_allow, Lua"):
            stepper.use("lua")
        assert stepper.strategy == "naive_allow"


# --- reset, errors ----------------------------------------------------------------------------


def test_reset_starts_again_from_setup(lab: Lab) -> None:
    with limiter_stepper(lab) as stepper:
        first = str(stepper.play("ABAB"))
        stepper.reset()
        assert stepper.steps == [] and stepper.trace.rows == [] and stepper.results == {}
        assert stepper.trace.final_state == "demo=4" and lab.client().get(lab.key("demo")) == "4"
        assert stepper.invariant_holds is True and stepper.broken_at is None
        assert stepper.waiting == {"A": "GET demo", "B": "GET demo"}
        assert str(stepper.play("ABAB")) == first


def test_stepping_a_finished_actor_is_a_clear_error(lab: Lab) -> None:
    with limiter_stepper(lab) as stepper:
        stepper.play("AA")
        assert stepper.results == {"A": True}
        with pytest.raises(ScheduleError, match=r"'A' has already finished \(result True\)"):
            stepper.step("A")
        assert stepper.steps == ["A", "A"]  # nothing happened
        with pytest.raises(ScheduleError, match="'C', which is not a client"):
            stepper.step("C")


def test_an_invariant_that_needs_every_result_says_how_to_fix_it(lab: Lab) -> None:
    key = lab.key("demo")
    actor = partial(naive_allow, key=key)
    setup = lambda c: c.set(key, 4)  # noqa: E731
    with pytest.raises(
        InvariantError, match=r"KeyError.*after step 0.*use results.get\(name\), or .*final_only"
    ):
        Stepper(
            lab,
            {"A": actor, "B": actor},
            setup=setup,
            watch=[key],
            invariant=lambda client, results: results["B"] is not True,
        )
    a_first = Stepper(
        lab,
        {"A": actor, "B": actor},
        setup=setup,
        watch=[key],
        invariant=lambda client, results: not results or results["A"] is True,
    )
    with a_first:
        a_first.step("B")
        with pytest.raises(
            InvariantError, match=r"KeyError: 'A' after step 2 \(finished so far: B"
        ):
            a_first.step("B")
        assert a_first.steps == ["B", "B"] and a_first.invariant_holds is None  # the step did run


def test_final_only_judges_once_every_actor_has_finished(lab: Lab) -> None:
    key = lab.key("visits")

    def lost_update(client) -> int:
        value = int(client.get(key) or 0) + 1
        client.set(key, value)
        return value

    def both_counted(client, results) -> bool:
        """The counter counts both visits"""
        return client.get(key) == "2"

    with Stepper(
        lab,
        {"A": lost_update, "B": lost_update},
        watch=[key],
        invariant=both_counted,
        final_only=True,
    ) as stepper:
        stepper.play("ABA")
        assert stepper.verdicts == [None, None, None, None]
        assert (
            stepper.invariant_words()
            == "invariant (The counter counts both visits): checked once every "
            "client has finished"
        )
        stepper.step("B")
        assert stepper.invariant_holds is False and stepper.broken_at == 4
        stepper.play("AABB")
        assert stepper.invariant_holds is True


# --- every continuation -------------------------------------------------------------------------


def test_explore_from_the_start_finds_the_known_four_of_six(lab: Lab) -> None:
    with limiter_stepper(lab) as stepper:
        found = stepper.explore_from_here()
        assert isinstance(found, Exploration)
        assert (found.total, found.bad_count) == (6, 4)
        assert found.bad == ["ABAB", "ABBA", "BAAB", "BABA"]
        text = str(stepper)
        assert "every schedule from here (the start): 4 of 6 break the invariant" in text
        assert "  BROKEN  ABAB  A=True  B=True" in text and "  ok      BBA  A=False  B=True" in text


def test_explore_from_here_marks_the_breaking_continuations(lab: Lab) -> None:
    with limiter_stepper(lab) as stepper:
        stepper.play("A")
        found = stepper.explore_from_here()
        assert [o.schedule for o in found.outcomes] == ["AAB", "ABAB", "ABBA"]
        assert found.bad == ["ABAB", "ABBA"] and found.good == ["AAB"]
        text = str(stepper)
        assert "every schedule from here (A): 2 of 3 break the invariant" in text
        assert "  ok      A|AB  A=True  B=False" in text
        assert "  BROKEN  A|BAB  A=True  B=True" in text
        # The explorer reset the keys; the stepper replayed its step, so it goes on where it was.
        assert stepper.steps == ["A"] and stepper.waiting == {"A": "INCRBY demo 1", "B": "GET demo"}
        stepper.step("A")
        assert "every schedule from here" not in str(stepper)  # a step makes the exploration stale
        assert stepper.step("B").reply == "'5'" and stepper.results == {"A": True, "B": False}


def test_explore_from_here_after_the_reads_every_continuation_breaks(lab: Lab) -> None:
    with limiter_stepper(lab) as stepper:
        stepper.play("AB")
        found = stepper.explore_from_here()
        assert (found.total, found.bad) == (2, ["ABAB", "ABBA"])


def test_explore_from_here_needs_an_invariant(lab: Lab) -> None:
    key = lab.key("demo")
    with Stepper(lab, {"A": partial(naive_allow, key=key)}, watch=[key]) as stepper:
        assert stepper.invariant_holds is None and stepper.invariant_words() == "no invariant given"
        with pytest.raises(ValueError, match="needs an invariant"):
            stepper.explore_from_here()


# --- the lock and its clock --------------------------------------------------------------------


def test_blind_del_after_the_lease_ran_out_removes_b_s_lock(lab: Lab) -> None:
    with lock_stepper(lab) as stepper:
        assert stepper.waiting["T"] == "(clock) TTL of lock runs out"
        stepper.step("A")
        assert stepper.waiting == {
            "A": "DEL lock",
            "T": "(clock) TTL of lock runs out",
            "B": "SET lock tok-B NX PX 30000",
        }
        assert stepper.step("T").reply == "'TTL ran out: key expired'"
        assert stepper.step("B").state == "lock=tok-B (ttl)"
        assert stepper.invariant_holds is True and stepper.results["B"] == "holding"
        row = stepper.step("A")
        assert (row.command, row.reply, row.state) == ("DEL lock", "1", "lock=nil")
        assert stepper.invariant_holds is False and stepper.broken_at == 4
        assert "invariant (If B took the lock, nobody removed it): BROKEN after step 4" in str(
            stepper
        )


def test_blind_del_breaks_in_exactly_one_schedule(lab: Lab) -> None:
    with lock_stepper(lab) as stepper:
        found = stepper.explore_from_here()
        assert (found.total, found.bad) == (11, ["ATBA"])
        stepper.play("AT")
        assert stepper.explore_from_here().bad == ["ATBA"]
        stepper.play("AB")  # B finds the lock taken while A's lease still runs
        assert stepper.results == {"B": "busy"} and stepper.explore_from_here().bad_count == 0


def test_checked_release_keeps_b_s_lock_on_every_schedule(lab: Lab) -> None:
    with lock_stepper(lab, hold_then_checked_del) as stepper:
        stepper.play("ATBA")
        assert stepper.verdicts == [True] * 5
        assert stepper.results == {
            "A": "not mine any more",
            "T": "TTL ran out: key expired",
            "B": "holding",
        }
        stepper.reset()
        assert stepper.explore_from_here().bad_count == 0


# --- the dictionary ---------------------------------------------------------------------------


def test_two_get_or_puts_of_one_text_hand_out_two_ids(lab: Lab) -> None:
    with dictionary_stepper(lab) as stepper:
        stepper.play("ABABA")
        assert stepper.results == {"A": 1} and stepper.invariant_holds is True
        row = stepper.step("B")
        assert row.command == "HSET dict price 2" and row.state == "dict={#next: 2, price: 2}"
        assert stepper.results == {"A": 1, "B": 2}
        assert stepper.invariant_holds is False and stepper.broken_at == 6


def test_dictionary_continuations_from_both_misses_all_break(lab: Lab) -> None:
    with dictionary_stepper(lab) as stepper:
        found = stepper.explore_from_here()
        assert (found.total, found.bad_count) == (20, 18)  # only AAAB and BBBA stay apart
        assert sorted(found.good) == ["AAAB", "BBBA"]
        stepper.play("AB")
        assert (stepper.explore_from_here().total, stepper.explore_from_here().bad_count) == (6, 6)


def test_one_script_get_or_put_stays_green(lab: Lab) -> None:
    with dictionary_stepper(lab, lua_get_or_put) as stepper:
        stepper.play("AB")
        assert stepper.results == {"A": 1, "B": 1} and stepper.verdicts == [True, True, True]
        assert stepper.explore_from_here().bad_count == 0


# --- the widget, headless -------------------------------------------------------------------------


def test_widget_buttons_call_step_reset_and_explore(lab: Lab) -> None:
    with limiter_stepper(lab) as stepper:
        box = stepper.widget()
        assert isinstance(box, ipywidgets.VBox) and stepper.widget() is box
        view = stepper._view
        buttons = view.buttons
        assert set(buttons) == {"A", "B"} and all(
            isinstance(b, ipywidgets.Button) for b in buttons.values()
        )
        assert (
            buttons["A"].description == "A: next round trip"
            and buttons["A"].tooltip == "sends GET demo"
        )
        for name in "ABA":
            buttons[name].click()
        assert stepper.steps == ["A", "B", "A"]
        assert buttons["A"].description == "A returned True" and buttons["A"].disabled
        assert "INCRBY demo 1" in view.picture.value and "holds after step 3" in view.picture.value
        buttons["B"].click()
        assert "BROKEN after step 4" in view.picture.value and "#cf222e" in view.picture.value
        view.reset_button.click()
        assert stepper.steps == [] and not buttons["A"].disabled
        assert buttons["A"].description == "A: next round trip"
        view.explore_button.click()
        assert (
            "every schedule from here (the start): 4 of 6 break the invariant" in view.picture.value
        )
        assert (
            view.explore_button.description == "Show every schedule"
            and not view.explore_button.disabled
        )


def test_widget_shows_an_error_instead_of_raising(lab: Lab) -> None:
    with limiter_stepper(lab) as stepper:
        stepper.widget()
        view = stepper._view
        view.buttons["A"].click()
        view.buttons["A"].click()
        view.buttons[
            "A"
        ].click()  # disabled in a browser; a programmatic click still reaches the handler
        assert "has already finished" in view.error.value and stepper.steps == ["A", "A"]
        view.buttons["B"].click()
        assert view.error.value == ""


def test_widget_follows_plain_calls_and_has_a_clock_button(lab: Lab) -> None:
    with lock_stepper(lab) as stepper:
        stepper.widget()
        view = stepper._view
        assert view.buttons["T"].description == "T: TTL of lock runs out"
        stepper.play("AT")
        assert view.buttons["T"].description == "T returned 'TTL ran out: key expired'"
        assert "T       (clock) TTL of lock runs out" in str(stepper)
        assert "(clock) TTL of lock runs out" in view.picture.value


def test_widget_strategy_menu_swaps_in_the_fix(lab: Lab) -> None:
    key = lab.key("demo")
    fix = {"A": partial(lua_allow, key=key), "B": partial(lua_allow, key=key)}
    with limiter_stepper(lab, fixes={"Lua": fix}) as stepper:
        stepper.widget()
        view = stepper._view
        assert list(view.strategy.options) == ["naive_allow", "Lua"]
        for name in "ABAB":
            view.buttons[name].click()
        assert "BROKEN after step 4" in view.picture.value
        view.strategy.value = "Lua"
        assert stepper.strategy == "Lua" and stepper.steps == []
        view.buttons["A"].click()
        view.buttons["B"].click()
        assert "strategy: Lua" in view.picture.value and "holds after step 2" in view.picture.value
        stepper.use("naive_allow")  # from Python: the menu follows
        assert view.strategy.value == "naive_allow"


def test_a_stepper_without_fixes_has_no_strategy_menu(lab: Lab) -> None:
    with limiter_stepper(lab) as stepper:
        stepper.widget()
        assert not hasattr(stepper._view, "strategy") and stepper.strategies == ["naive_allow"]


def test_a_closed_stepper_says_so_and_reset_starts_it_again(lab: Lab) -> None:
    with limiter_stepper(lab) as stepper:
        stepper.widget()
        view = stepper._view
        stepper.play("AB")
        stepper.close()
        with pytest.raises(ScheduleError, match=r"closed \(reset\(\) starts it again\)"):
            stepper.step("A")
        assert (
            view.buttons["A"].disabled
            and view.explore_button.disabled
            and not view.reset_button.disabled
        )
        assert (
            "closed" in view.error.value and "GET demo" in view.picture.value
        )  # the last picture stays
        view.reset_button.click()
        assert stepper.steps == [] and not view.buttons["A"].disabled and view.error.value == ""


def test_steps_asked_from_any_thread_run_on_the_stepper_s_own(lab: Lab) -> None:
    """A widget's clicks may come from several threads (ipykernel 7's subshells): the actors
    are greenlets of one thread, so each step is handed to it; the clicks still add up."""
    key = lab.key("n")
    stepper = Stepper(lab, {"A": lambda c: [c.incr(key), c.incr(key)]}, watch=[key])
    elsewhere = threading.Thread(target=stepper.step, args=("A",))
    elsewhere.start()
    elsewhere.join()
    stepper.step("A")  # this thread, the next step of the same run
    assert stepper.results == {"A": [1, 2]} and [r.client for r in stepper.trace.rows] == ["A"] * 2
    closing = threading.Thread(target=stepper.close)
    closing.start()
    closing.join()
    assert lab.client().get(key) == "2"
