"""What recovering one segment derives from its batch headers (twin: ``segment_recovery_py.py``)."""
import numpy as np
import numpy.typing as npt

CUT_NONE: int
CUT_CRC: int
CUT_OFFSETS: int
NO_TIMESTAMP: int

def recovery_plan(h: npt.NDArray[np.int64], base_offset: int, index_interval: int,
                  max_index_size: int) -> tuple[int, int, bytes, bytes, int, int, int]: ...
def new_epochs(h: npt.NDArray[np.int64], n: int, latest_epoch: int) -> list[tuple[int, int]]: ...
