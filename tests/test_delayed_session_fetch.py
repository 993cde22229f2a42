"""DelayedSessionFetch (§6.9): a follower's incremental fetch parked over its fetch session."""
from __future__ import annotations

from fetcher_cluster import FetcherCluster

from replica_core.replication.delayed import DelayedFetch, DelayedSessionFetch
from replica_core.replication.purgatory import DelayedOperation


def parked_session_fetch() -> DelayedSessionFetch:
    """A caught-up follower's long poll, parked on the leader (broker 0)."""
    c = FetcherCluster((0, 1), replica_fetch_wait_max_ms=500)
    c.leader_and_isr(leader=0)
    c.produce(values=[b"a", b"b"])
    for _ in range(3):  # until the HW is known: then quiet
        c.step([1])
        c.advance(1)
    parked = list(c.rm(0)._parked_sessions.values())
    assert len(parked) == 1
    return parked[0]


def test_a_parked_session_fetch_is_set_up_as_a_delayed_fetch_without_statuses() -> None:
    """Its constructor sets in one step what DelayedFetch's (and DelayedOperation's under it)
    would set for the same request with no per-partition statuses: every such attribute, with
    the same value."""
    op = parked_session_fetch()
    assert isinstance(op, DelayedFetch) and isinstance(op, DelayedOperation)
    reference = DelayedFetch(op.params, (), op.manager, op.deliver, op.context)
    assert set(vars(reference)) == {"delay_ms", "_completed", "_timer", "params", "statuses",
                                    "manager", "deliver", "context", "response"}
    for name, value in vars(reference).items():
        if name == "_timer":  # op waits in the fetch purgatory; the reference was never started
            assert op._timer is op.manager.fetch_purgatory and value is None
            continue
        assert getattr(op, name) == value, name
    assert op.delay_ms == 500 and op.statuses == [] and not op.is_completed
    assert op.response is None and op.context is op._incremental
