"""connect(): backend selection, shared data between clients, capabilities, quiet 8.4 calls."""

import subprocess
import sys
import threading

import pytest

from helpers import connect
from helpers.backend.lab import BACKENDS


def test_default_backend_is_embedded(monkeypatch):
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.delenv("RACELAB_BACKEND", raising=False)
    lab = connect("t")
    assert lab.kind == "embedded"
    assert lab.version == "8.4.0"
    assert lab.owns_server
    lab.close()


def test_redis_url_wins_over_backend_variable(monkeypatch, real_url):
    monkeypatch.setenv("REDIS_URL", real_url)
    monkeypatch.setenv("RACELAB_BACKEND", "embedded")
    lab = connect("t")
    assert lab.kind == "real"
    lab.close()


def test_unknown_backend_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown backend 'mongo'"):
        connect("t", backend="mongo")
    assert BACKENDS == ("embedded", "real", "cluster")


def test_clients_are_independent_but_share_data(lab):
    a, b = lab.client(), lab.client()
    a.set(lab.key("shared"), "from-a")
    assert b.get(lab.key("shared")) == "from-a"
    assert a.client_id() != b.client_id()


def test_clients_in_threads_see_every_increment(lab):
    def work():
        c = lab.client()
        for _ in range(200):
            c.incr(lab.key("n"))
    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert lab.client().get(lab.key("n")) == "800"


def test_capabilities_on_each_backend(lab):
    caps = lab.caps
    assert caps.lua and caps.functions and caps.delex and caps.digest
    assert not caps.cluster
    if lab.kind == "real":
        assert caps.set_ifeq and caps.eval_ro and caps.script_kill
    else:
        assert not caps.eval_ro and not caps.script_kill  # fakeredis lacks both (see divergences)


def test_capability_probe_leaves_no_key(lab):
    assert lab.ns.keys(lab.client()) == []


def test_cluster_backend_reports_cluster(cluster_lab):
    assert cluster_lab.kind == "cluster"
    assert cluster_lab.caps.cluster
    assert "capabilities" in cluster_lab.describe()


def test_84_commands_print_no_experimental_warning_in_a_fresh_interpreter():
    # pytest resets warning filters per test, so check in a new interpreter with every
    # warning turned into an error: only redis-py's experimental notices are filtered.
    code = """
import warnings
from helpers import connect
lab = connect("t", backend="embedded")
c = lab.client()
k = lab.key("k")
c.set(k, "v")
assert c.digest(k)
assert c.delex(k, ifeq="v") == 1
try:
    warnings.warn("some other warning", UserWarning)
except UserWarning:
    print("other warnings still raise")
"""
    done = subprocess.run([sys.executable, "-W", "error", "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "other warnings still raise"


def test_describe_names_backend_version_and_prefix(lab):
    text = lab.describe()
    assert f"backend: {lab.kind}" in text
    assert lab.version in text
    assert lab.ns.prefix in text


def test_lab_context_manager_cleans_up(real_url):
    with connect("t", url=real_url, owned=False) as lab:
        lab.client().set(lab.key("a"), 1)
    with connect("t", url=real_url, owned=False) as other:
        assert other.client().exists(lab.key("a")) == 0
