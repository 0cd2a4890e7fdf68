"""benchmarks/dictionary_latency.py: the size sweep runs, and its report shows medians and ratios."""

from __future__ import annotations

import pytest

from benchmarks import dictionary_latency as bench
from benchmarks.__main__ import benchmark_names
from helpers import Lab
from helpers.dictionary import check_dictionary, dict_keys
from helpers.instruments.measure import summarize


def test_runner_finds_the_dictionary_benchmark() -> None:
    assert "dictionary_latency" in benchmark_names()


def test_report_prints_medians_ratios_and_the_speed_up_at_the_largest_size() -> None:
    rows = [bench.SizeRow(100, summarize([0.002, 0.001, 0.003]), summarize([0.001]), 15.0, 30.0),
            bench.SizeRow(10_000, summarize([0.5]), summarize([0.001]), 3000.0, 30.0)]
    text = bench.report("real", "8.6.3", rows)
    assert "     100            2.000 ms (1.100-2.900)" in text
    assert "    2.0x" in text and "  500.0x" in text
    assert "0.5x" in text and "100x" in text
    assert text.endswith("speed-up of the Lua script at 10,000 strings: 500x (client side)")


def test_report_without_server_figures_has_no_server_columns() -> None:
    rows = [bench.SizeRow(100, summarize([0.002]), summarize([0.001]))]
    assert "server" not in bench.report("embedded", "8.4.0", rows)


def test_measure_sizes_grows_one_dictionary_and_leaves_it_valid(lab: Lab) -> None:
    client, keys = lab.client(), dict_keys(lab.ns, "bench")
    rows = bench.measure_sizes(client, keys, [40, 20], repeats=1, server=lab.kind == "real")
    assert [r.size for r in rows] == [20, 40]
    assert all(r.scan.n == 1 and r.lua.n == 1 and r.ratio > 0 for r in rows)
    assert all((r.server_scan_us is not None) == (lab.kind == "real") for r in rows)
    check = check_dictionary(client, keys)
    assert check.ok and check.size == 40


@pytest.mark.parametrize("argv", [["--repeats", "0"], ["--sizes", "a,b"], ["--sizes", "0"]])
def test_main_rejects_bad_arguments(argv: list[str]) -> None:
    with pytest.raises(SystemExit):
        bench.main(argv)


def test_without_a_redis_server_both_skips_real_and_real_alone_fails(monkeypatch: pytest.MonkeyPatch,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
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
