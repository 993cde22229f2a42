"""Sweep grids: expansion, seeds independent of execution, validation."""
import pytest

from replica_core.errors import InvalidConfigurationError
from replica_core.sweep import grid_from_dict, row_seed


def grid(**kw):
    doc = {"scenario": "default", "seeds": 2, "base_seed": 5,
           "set": {"duration_s": 10, "topics.0.partitions": 30},
           "axes": {"min.insync.replicas": [1, 2], "unclean.leader.election.enable": [False, True]}}
    doc.update(kw)
    return grid_from_dict(doc)


def test_rows_are_product_times_seeds_with_common_seeds():
    g = grid()
    rows = g.rows()
    assert g.n_configs == 4 and len(rows) == 8
    assert [r.row_id for r in rows] == list(range(8))
    # every configuration sees the same two seeds
    by_cfg = {}
    for r in rows:
        by_cfg.setdefault(r.config_id, []).append(r.seed)
    assert len({tuple(v) for v in by_cfg.values()}) == 1
    assert len(set(by_cfg[0])) == 2
    s = rows[3].scenario()
    assert s.seed == rows[3].seed and s.duration_s == 10 and s.topics[0].partitions == 30
    assert s.configs["min.insync.replicas"] == rows[3].axes["min.insync.replicas"]


def test_row_seed_is_a_pure_function():
    assert row_seed(5, 0) == row_seed(5, 0)
    assert row_seed(5, 0) != row_seed(5, 1) != row_seed(6, 1)
    assert grid().rows() == grid().rows()


@pytest.mark.parametrize("bad", [
    {"seeds": 0}, {"axes": {"workload.acks": [7]}}, {"axes": {"cluster.brokers": []}},
    {"scenario": "no-such-scenario"}, {"colour": "blue"},
])
def test_bad_grids_fail_before_running(bad):
    with pytest.raises(InvalidConfigurationError):
        grid(**bad)
