"""Invariant-checker kernels over batch header rows (twin: ``invariants_py.py``)."""
import numpy as np
import numpy.typing as npt

OUT_OF_ORDER: int
NONE: int
DIVERGED: int

def check_rows(h: npt.NDArray[np.int64], limit: int) -> int: ...
def agree_below(a: npt.NDArray[np.int64], b: npt.NDArray[np.int64], limit: int,
                start: int = ...) -> bool: ...
def check_follower(a: npt.NDArray[np.int64], b: npt.NDArray[np.int64], limit: int) -> int: ...
