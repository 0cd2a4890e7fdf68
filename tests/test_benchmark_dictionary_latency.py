"""benchmarks/dictionary_latency.py: the size sweep times races.dictionary's strategies, and its report."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from benchmarks import dictionary_latency as bench
from benchmarks.__main__ import benchmark_names
from helpers import Lab
from helpers.backend.scripts import delete_library
from helpers.instruments.measure import summarize
from races import dictionary
from races.dictionary import check_dictionary, dict_keys, hgetall_hsetnx_get_or_put, lua_get_or_put


@pytest.fixture
def lab(lab: Lab) -> Iterator[Lab]:
    """The conftest's lab; afterwards racelab_dict (loaded by the Function strategy) is deleted."""
    yield lab
    delete_library(lab.client(), "dict_library")


def test_runner_finds_the_dictionary_benchmark() -> None:
    assert "dictionary_latency" in benchmark_names()


def test_the_benchmark_times_every_strategy_of_races_dictionary_itself() -> None:
    strategies = [
        getattr(dictionary, name) for name in dir(dictionary) if name.endswith("_get_or_put")
    ]
    assert len(strategies) == 7
    assert sorted(map(id, bench.STRATEGIES.values())) == sorted(map(id, strategies))


def _row(
    size: int, scan: list[float], lua: list[float], server: tuple[float, float] | None = None
) -> bench.SizeRow:
    stats = {hgetall_hsetnx_get_or_put: summarize(scan), lua_get_or_put: summarize(lua)}
    server_us = {hgetall_hsetnx_get_or_put: server[0], lua_get_or_put: server[1]} if server else {}
    return bench.SizeRow(size, stats, server_us)


def test_report_prints_medians_ratios_and_the_speed_up_at_the_largest_size() -> None:
    rows = [
        _row(100, [0.002, 0.001, 0.003], [0.001], (15.0, 30.0)),
        _row(10_000, [0.5], [0.001], (3000.0, 30.0)),
    ]
    text = bench.report("real", "8.6.3", rows)
    lines = text.splitlines()
    assert lines[1].split() == [
        "size",
        "HGETALL",
        "+",
        "HSETNX",
        "Lua",
        "script",
        "HGETALL/Lua",
        "server",
        "µs",
        "HGETALL",
        "server",
        "µs",
        "script",
        "server",
        "ratio",
    ]
    assert lines[2].split() == ["100", "2.000", "1.000", "2.0x", "15.0", "30.0", "0.5x"]
    assert lines[3].split() == ["10,000", "500.000", "1.000", "500.0x", "3,000.0", "30.0", "100x"]
    assert text.endswith("speed-up of the Lua script at 10,000 strings: 500x (client side)")


def test_report_without_server_figures_has_no_server_columns() -> None:
    assert "server" not in bench.report("embedded", "8.4.0", [_row(100, [0.002], [0.001])])


def test_measure_sizes_grows_one_dictionary_times_each_strategy_and_leaves_it_valid(
    lab: Lab,
) -> None:
    client, keys = lab.client(), dict_keys(lab.ns, "bench")
    rows = bench.measure_sizes(client, keys, [40, 20], repeats=1, server=lab.kind == "real")
    assert [r.size for r in rows] == [20, 40]
    for r in rows:
        assert list(r.stats) == list(bench.STRATEGIES.values())
        assert all(s.n == 1 and s.median > 0 for s in r.stats.values()) and r.ratio > 0
        assert (r.server_us[hgetall_hsetnx_get_or_put] is not None) == (lab.kind == "real")
    assert check_dictionary(client, keys) == [] and client.hlen(keys.ids) == 40


def test_truncate_returns_a_dictionary_to_its_size(lab: Lab) -> None:
    client, keys = lab.client(), dict_keys(lab.ns, "t")
    bench.prefill(client, keys, 5)
    for word in ["x", "y"]:
        lua_get_or_put(client, word, keys)
    assert bench.truncate(client, keys, 5) == 2
    assert check_dictionary(client, keys) == [] and client.hlen(keys.ids) == 5
    assert lua_get_or_put(client, "x", keys) == 6


@pytest.mark.parametrize("argv", [["--repeats", "0"], ["--sizes", "a,b"], ["--sizes", "0"]])
def test_main_rejects_bad_arguments(argv: list[str]) -> None:
    with pytest.raises(SystemExit):
        bench.main(argv)


def test_without_a_redis_server_both_skips_real_and_real_alone_fails(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def no_server(backend: str, sizes: list[int], repeats: int) -> str:
        if backend == "real":
            raise bench.ServerNotFound("no redis-server >= 8.4 found")
        return f"{backend} table"

    monkeypatch.setattr(bench, "run_backend", no_server)
    assert bench.main(["--backend", "both"]) == 0
    out = capsys.readouterr().out
    assert "embedded table" in out and "real server skipped: no redis-server" in out
    assert bench.main(["--backend", "real"]) == 1
    assert "cannot run on a real server" in capsys.readouterr().out
