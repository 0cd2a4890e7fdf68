"""Every private redis-py name the suite uses, in one place (tests/test_redispy.py pins each one).

redis-py has no public name for these, so the rest of the suite asks here instead:

* its two RESP parsers (``redis._parsers``): hiredis's, and the pure-Python one that ``lab.parser``
  can force (``RACELAB_PARSER=python``);
* the arguments ``RedisCluster.pipeline()`` gives a ``ClusterPipeline``, two of them private
  (``_lock``, ``_event_dispatcher``), so that the guard's own pipeline class is built as redis-py
  builds its own;
* the two experimental-API warnings redis-py >= 7.1 prints on every call of the Redis 8.4 commands
  the suite teaches (``quiet_experimental_warnings``).

If redis-py renames or drops one, the test fails with the name; nothing else has to be read.
"""

from __future__ import annotations

import warnings
from typing import Any, TypeVar

import redis.cluster
from redis._parsers import _HiredisParser, _RESP2Parser
from redis.utils import HIREDIS_AVAILABLE

HIREDIS_PARSER: type = _HiredisParser
PYTHON_PARSER: type = _RESP2Parser  # redis-py's pure-Python parser (it takes RESP3's when needed)


def hiredis_version() -> str | None:
    """Return the version of the hiredis that redis-py uses, or None (not installed, too old)."""
    if not HIREDIS_AVAILABLE:
        return None
    import hiredis  # noqa: PLC0415 - present only when HIREDIS_AVAILABLE

    return str(hiredis.__version__)


_Pipeline = TypeVar("_Pipeline", bound=redis.cluster.ClusterPipeline)


def cluster_pipeline(
    cls: type[_Pipeline], client: redis.cluster.RedisCluster, transaction: Any
) -> _Pipeline:
    """Return a pipeline of class cls for client, made with the arguments RedisCluster.pipeline uses."""
    return cls(
        nodes_manager=client.nodes_manager,
        commands_parser=client.commands_parser,
        # redis-py's own RedisCluster.pipeline passes this dict; ClusterPipeline says list[ClusterNode]
        startup_nodes=client.nodes_manager.startup_nodes,  # type: ignore[arg-type]
        result_callbacks=client.result_callbacks,
        cluster_response_callbacks=client.cluster_response_callbacks,
        read_from_replicas=client.read_from_replicas,
        load_balancing_strategy=client.load_balancing_strategy,
        reinitialize_steps=client.reinitialize_steps,
        retry=client.retry,
        lock=client._lock,
        transaction=transaction,
        event_dispatcher=client._event_dispatcher,
    )


def quiet_experimental_warnings() -> None:
    """Hide redis-py's "experimental" notices for DELEX, DIGEST and SET IFEQ (and no other warning).

    redis-py >= 7.1 warns "Call to experimental method delex/digest ..." and "... experimental
    usage of input argument/s 'ifeq'" on every call. They are stable server commands; the warning
    is about redis-py's Python signature. Repeated in every cell it would bury the output a learner
    reads (and change with redis-py versions, breaking nbval). ``connect()`` calls this.
    """
    warnings.filterwarnings(
        "ignore",
        message=r"Call to experimental method (delex|digest|digest_local)\b",
        category=UserWarning,
    )
    warnings.filterwarnings(
        "ignore",
        message=r"Call to '\w+' method with experimental usage of input argument",
        category=UserWarning,
    )
