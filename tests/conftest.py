"""Shared fixtures. ``kernel_pair`` runs a test against the native kernel and its plain twin."""
from __future__ import annotations

import importlib
import os
from pathlib import Path

import pytest


def _find_shared() -> Path:
    """The workspace's ``shared`` folder: $REPLICA_CORE_SHARED, else beside the checkout, else
    the workspace default."""
    candidates = [os.environ.get("REPLICA_CORE_SHARED", ""),
                  str(Path(__file__).resolve().parents[1].parent / "shared"), "/work/shared"]
    for c in candidates:
        if c and (Path(c) / "fixtures" / "kafka-logs").is_dir():
            return Path(c)
    return Path(candidates[1])


SHARED = _find_shared()
FIXTURE_LOGS = SHARED / "fixtures" / "kafka-logs"


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
