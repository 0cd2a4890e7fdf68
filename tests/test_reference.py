"""Reference figures (benchmarks/results/*.json) and the relative-cost figures notebooks plot."""

from __future__ import annotations

import importlib
import json

import matplotlib
import pytest

from benchmarks.reference import WORKLOADS, module_of
from helpers import Lab
from helpers.instruments.reference import (
    CLIENTS,
    FIELDS,
    PROVENANCE_FIELDS,
    RESULTS_DIR,
    measure_costs,
    reference,
    relative_cost,
    runnable,
)
from races import ratelimit

matplotlib.use("Agg")
# The workloads' reference figures; other benchmarks (explorer.json) keep their results beside them.
FILES = [RESULTS_DIR / f"{name}.json" for name in sorted(WORKLOADS)]


def test_every_workload_has_a_committed_reference_file() -> None:
    assert [p.name for p in FILES if not p.is_file()] == []


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_a_reference_file_has_every_field(path) -> None:  # type: ignore[no-untyped-def]
    data = json.loads(path.read_text())
    assert [f for f in FIELDS if f not in data] == []
    assert [f for f in PROVENANCE_FIELDS if f not in data["provenance"]] == []
    assert data["name"] == path.stem and data["clients"] == list(CLIENTS)
    version = tuple(int(p) for p in data["provenance"]["server_version"].split(".")[:2])
    assert version >= (8, 4), "reference figures come from a real Redis >= 8.4"
    assert data["parsers"] and set(data["parsers"]) <= {"hiredis", "python"}
    if data["provenance"]["hiredis"] != "not installed":
        assert set(data["parsers"]) == {"hiredis", "python"}, "hiredis on and off"
    for figures in data["parsers"].values():
        for kind in ("ratios", "requests_per_s", "best_requests_per_s", "round_trips", "retries"):
            assert sorted(figures[kind]) == sorted(str(c) for c in CLIENTS)
            for per_strategy in figures[kind].values():
                assert list(per_strategy) == list(data["strategies"])
        assert all(r[data["baseline"]] == 1 for r in figures["ratios"].values())


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_a_reference_file_names_only_strategies_that_exist(path) -> None:  # type: ignore[no-untyped-def]
    data = json.loads(path.read_text())
    module = importlib.import_module(data["module"])
    missing = [f for f in data["strategies"].values() if not callable(getattr(module, f, None))]
    assert missing == [], f"{path.name} names strategies {data['module']} no longer has"
    workload = WORKLOADS[data["name"]]
    declared = {label: fn.__name__ for label, fn in workload.strategies.items()}
    assert set(data["strategies"].items()) <= set(declared.items())
    assert data["baseline"] == workload.baseline and data["module"] == module_of(workload)


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_a_workload_is_declared_beside_its_strategies(name: str) -> None:
    workload = WORKLOADS[name]
    module = importlib.import_module(module_of(workload))
    assert module.REFERENCE is workload
    assert workload.baseline in workload.strategies and set(workload.needs) <= set(
        workload.strategies
    )
    assert all(getattr(module, fn.__name__) is fn for fn in workload.strategies.values())


def test_embedded_plots_the_reference_with_its_provenance() -> None:
    from helpers import connect

    with connect("test_reference", backend="embedded") as lab:
        costs = relative_cost(lab, ratelimit.REFERENCE)
    assert costs.source == "reference" and costs.provenance.startswith("reference: Redis 8.")
    assert costs.ratio("naive", 1) == 1 and costs.ratio("naive", 8) == 1
    (ax,) = costs.plot().axes
    assert "reference" in ax.get_title() and ax.get_ylabel() and ax.get_xlabel()
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["1 client", "8 clients"]
    assert costs.table().splitlines()[1].split()[:3] == ["naive", "1.00x", "1.00x"]
    assert reference("ratelimit_cost", "python").parser == "python"


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_a_workload_measures_live(lab: Lab, name: str) -> None:
    measured = measure_costs(lab, WORKLOADS[name], clients=(1, 2), requests=8, repeats=1)
    baseline = WORKLOADS[name].baseline
    assert measured["ratios"]["1"][baseline] == 1 and measured["ratios"]["2"][baseline] == 1
    assert set(measured["ratios"]["2"]) == set(runnable(WORKLOADS[name], lab))


def test_a_name_is_refused_with_what_to_pass_instead() -> None:
    from helpers import connect

    with connect("test_reference", backend="embedded") as lab:
        with pytest.raises(TypeError, match=r"ratelimit\.REFERENCE, not 'ratelimit_cost'"):
            relative_cost(lab, "ratelimit_cost")  # type: ignore[arg-type]


def test_a_real_server_measures_live(lab: Lab) -> None:
    if lab.kind == "embedded":
        pytest.skip("live figures are for a real server")
    costs = relative_cost(lab, ratelimit.REFERENCE, requests=16, repeats=1)
    assert costs.source == "live" and costs.provenance.startswith("live: Redis")


def test_a_live_dictionary_measure_leaves_no_library_behind(cluster_lab: Lab) -> None:
    measured = measure_costs(cluster_lab, WORKLOADS["dictionary_cost"], (1,), requests=8, repeats=1)
    assert measured["ratios"]["1"]["naive"] == 1
    listed = cluster_lab.client().function_list(library="racelab_dict")
    assert not any(listed.values())  # {node: libraries}: none on any node
