"""Native kernels (Cython) and their plain-Python twins.

Every kernel module ``_name`` (compiled) has a twin ``name_py`` (plain Python) with the same
functions and results. ``REPLICA_CORE_PURE=1`` in the environment makes :func:`load` return the
twins everywhere; tests run both and compare.
"""
from __future__ import annotations

import importlib
import os
from types import ModuleType

PURE = os.environ.get("REPLICA_CORE_PURE", "") not in ("", "0", "false", "no")


def load(native: str, twin: str, *, pure: bool | None = None) -> ModuleType:
    """Import kernel module ``native`` unless pure mode is on (or it is not built); else ``twin``."""
    if pure is None:
        pure = PURE
    if not pure:
        try:
            return importlib.import_module(f"replica_core._fast.{native}")
        except ImportError:
            if os.environ.get("REPLICA_CORE_REQUIRE_NATIVE"):
                raise
    return importlib.import_module(f"replica_core._fast.{twin}")
