from typing import Any

import numpy as np
import numpy.typing as npt

COMMITTED: int
FETCH_LEO_CHANGED: int
FETCH_EXPAND: int
FETCH_HW_MOVED: int
LEAD_KEPT_ROW: int
LEAD_NEW_EPOCH: int
LEAD_NEW_LEADER: int
SESSION_ORDER: int
SESSION_ROWS: int
SESSION_SLOTS: int
SESSION_FETCH_OFFSET: int
SESSION_LOG_START: int
SESSION_SENT_HW: int
SESSION_SENT_LOG_START: int
SESSION_REQ_EPOCH: int
SESSION_OUT: int
SESSION_MARK: int
SESSION_ROW_COUNT: int
EVERY_COLUMN: int

def session_move_to_end(session: npt.NDArray[np.int64], n: int, j: int) -> int: ...

class ReplicaStateKernels:
    num_partitions: int
    max_replicas: int
    def __init__(self, cols: Any, max_replicas: int) -> None: ...
    def follower_fetch(
        self,
        p: int,
        r: int,
        fetch_offset: int,
        follower_log_start: int,
        fetch_time_ms: int,
        leader_end_offset: int,
        broker_epoch: int = -1,
    ) -> bool: ...
    def follower_fetch_hw(
        self,
        p: int,
        r: int,
        fetch_offset: int,
        follower_log_start: int,
        fetch_time_ms: int,
        leader_end_offset: int,
        broker_epoch: int,
        max_lag_ms: int,
    ) -> int: ...
    def expand_or_hw(
        self, p: int, r: int, leo_changed: bool, now_ms: int, max_lag_ms: int
    ) -> int: ...
    def follower_fetch_batch(
        self,
        ps: npt.NDArray[np.int64],
        rs: npt.NDArray[np.int64],
        fetch_offsets: npt.NDArray[np.int64],
        follower_log_starts: npt.NDArray[np.int64],
        leader_end_offsets: npt.NDArray[np.int64],
        fetch_time_ms: int,
        broker_epoch: int,
        leo_changed: npt.NDArray[np.uint8],
    ) -> int: ...
    def session_fetch(
        self,
        session: npt.NDArray[np.int64],
        n: int,
        apply_quiet: bool,
        fetch_time_ms: int,
        broker_epoch: int,
        since: int = ...,
    ) -> int: ...
    def session_pending(self, session: npt.NDArray[np.int64], n: int) -> int: ...
    def session_pending_marked(self, session: npt.NDArray[np.int64], n: int, stamp: int
                               ) -> int: ...
    def is_caught_up(self, p: int, r: int, now_ms: int, max_lag_ms: int) -> bool: ...
    def hw_candidate(self, p: int, now_ms: int, max_lag_ms: int) -> int: ...
    def maybe_increment_hw(self, p: int, now_ms: int, max_lag_ms: int) -> bool: ...
    def isr_size(self, p: int) -> int: ...
    def maximal_isr_size(self, p: int) -> int: ...
    def sorted_isr(self, p: int) -> list[int]: ...
    def sorted_maximal_isr(self, p: int) -> list[int]: ...
    def reached_isr_size(self, p: int, required_offset: int) -> int: ...
    def hw_candidates_all(
        self,
        now_ms: int,
        max_lag_ms: int,
        n: int,
        out_hw: npt.NDArray[np.int64],
        out_changed: npt.NDArray[np.uint8],
    ) -> int: ...
    def out_of_sync(self, p: int, now_ms: int, max_lag_ms: int) -> int: ...
    def out_of_sync_all(
        self, now_ms: int, max_lag_ms: int, n: int, out_mask: npt.NDArray[np.uint8]
    ) -> int: ...
    def hw_and_out_of_sync_all(
        self,
        now_ms: int,
        max_lag_ms: int,
        n: int,
        out_hw: npt.NDArray[np.int64],
        out_changed: npt.NDArray[np.uint8],
        out_mask: npt.NDArray[np.uint8],
    ) -> tuple[int, int]: ...
    def can_expand_isr(self, p: int, r: int) -> bool: ...
    def expand_candidates_all(self, n: int, out_mask: npt.NDArray[np.uint8]) -> int: ...
    def follower_lags(self, n: int, out: npt.NDArray[np.int64]) -> int: ...
    def check_lead(
        self,
        rows: list[int],
        reps: list[int],
        rep_off: list[int],
        isr: list[int],
        isr_off: list[int],
        min_isrs: list[int],
        leos: list[int],
        hws: list[int],
        me: int,
    ) -> int: ...
    def lead_rows(
        self,
        rows: list[int],
        flags: list[int],
        reps: list[int],
        rep_off: list[int],
        isr: list[int],
        isr_off: list[int],
        ineligible: list[int],
        epochs: list[int],
        leos: list[int],
        hws: list[int],
        min_isrs: list[int],
        log_starts: list[int],
        now_ms: int,
        me: int,
    ) -> int: ...
