"""Shared fixtures. ``kernel_pair`` runs a test against the native kernel and its plain twin."""
from __future__ import annotations

import importlib
from pathlib import Path

import pytest

# Real Kafka broker data directories, committed with the tests (provenance in SOURCES.md there).
FIXTURE_LOGS = Path(__file__).resolve().parent / "data" / "kafka-logs"


def require_nonempty(items, what: str) -> list:
    """``items`` as a list; raises at collection time if it is empty, so a parametrised family
    whose inputs went missing errors instead of silently running zero tests."""
    items = list(items)
    if not items:
        raise RuntimeError(f"no {what} found under {FIXTURE_LOGS}: the test fixtures are missing")
    return items


def patch_method(monkeypatch, obj, name: str, replacement) -> None:
    """Replace method ``name`` of ``obj`` alone with ``replacement`` (called with the method's
    arguments, without ``self``) for the test. The product's hot classes have ``__slots__``,
    so the patch goes on the class and answers for ``obj`` only; every other instance keeps
    the real method."""
    cls = type(obj)
    real = getattr(cls, name)

    def dispatch(self, *args, **kwargs):
        if self is obj:
            return replacement(*args, **kwargs)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(cls, name, dispatch)


def clone_handler(handler):
    """A FetchSessionHandler in the same session state as ``handler`` (next metadata, session
    partitions and their order), to run two code paths from one starting point."""
    from replica_core.fetcher.fetch_session_handler import FetchSessionHandler

    twin = FetchSessionHandler(handler.node)
    twin.next_metadata = handler.next_metadata
    twin.session_partitions = dict(handler.session_partitions)
    twin._pos = dict(handler._pos)
    twin._next_pos = handler._next_pos
    return twin


def load_kernel(native: str, twin: str, impl: str):
    """The native (``impl == 'native'``) or twin module; a missing native build fails loudly."""
    name = native if impl == "native" else twin
    return importlib.import_module(f"replica_core._fast.{name}")


@pytest.fixture(params=["native", "twin"])
def kernel_impl(request) -> str:
    """Parametrise a test over both kernel implementations."""
    return request.param


@pytest.fixture(scope="session")
def fixture_logs() -> Path:
    if not FIXTURE_LOGS.is_dir():
        pytest.fail(f"Kafka fixture logs not found at {FIXTURE_LOGS}")
    return FIXTURE_LOGS


@pytest.fixture(params=["inprocess", "sim"])
def fetcher_transport(request, monkeypatch) -> str:
    """Run a ``FetcherCluster`` test under each transport: ``inprocess`` (the leader's
    ReplicaManager called directly) and ``sim`` (the simulator's SimLeaderEndPoint across an
    event loop and network). A module opts in with ``pytest.mark.usefixtures``; a test that
    cannot run over the network narrows it with ``fetcher_cluster.inprocess_only(reason)``."""
    import fetcher_cluster

    monkeypatch.setattr(fetcher_cluster.FetcherCluster, "default_transport", request.param)
    return request.param
