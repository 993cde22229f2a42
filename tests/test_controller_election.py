"""Election rules of Kafka's controller (§8.2-8.4)."""
from replica_core.controller import (
    NO_LEADER,
    controlled_shutdown_election,
    new_partition_election,
    offline_partition_election,
    preferred_replica_election,
    remove_replica_from_isr,
)


def test_new_partition_first_live_replica_in_assignment_order():
    e = new_partition_election([3, 1, 2], live={1, 2})
    assert e.leader == 1 and e.isr == (1, 2) and not e.unclean
    assert new_partition_election([3], live={1}).leader == NO_LEADER


def test_clean_election_prefers_assignment_order_not_isr_order():
    e = offline_partition_election([2, 3, 1], isr=[1, 3], live={1, 3}, unclean_enabled=False)
    assert e.leader == 3
    assert set(e.isr) == {1, 3} and not e.unclean


def test_clean_election_drops_dead_isr_members():
    e = offline_partition_election([1, 2, 3], isr=[1, 2, 3], live={2, 3}, unclean_enabled=False)
    assert e.leader == 2 and e.isr == (2, 3)


def test_no_live_isr_without_unclean_leaves_partition_offline():
    e = offline_partition_election([1, 2, 3], isr=[1], live={2, 3}, unclean_enabled=False)
    assert e.leader == NO_LEADER and not e.has_leader and not e.unclean


def test_unclean_election_picks_first_live_replica_alone():
    e = offline_partition_election([1, 3, 2], isr=[1], live={2, 3}, unclean_enabled=True)
    assert e.leader == 3 and e.isr == (3,) and e.unclean


def test_unclean_flag_not_set_when_isr_member_alive():
    e = offline_partition_election([1, 2], isr=[2], live={1, 2}, unclean_enabled=True)
    assert e.leader == 2 and not e.unclean


def test_preferred_election_only_first_replica():
    assert preferred_replica_election([1, 2], isr=[1, 2], live={1, 2}).leader == 1
    assert preferred_replica_election([1, 2], isr=[2], live={1, 2}) is None
    assert preferred_replica_election([1, 2], isr=[1, 2], live={2}) is None


def test_controlled_shutdown_skips_shutting_down_and_shrinks_isr():
    e = controlled_shutdown_election([1, 2, 3], isr=[1, 2, 3], live={1, 2, 3}, shutting_down={1})
    assert e.leader == 2 and e.isr == (2, 3)


def test_remove_replica_keeps_last_isr_member():
    assert remove_replica_from_isr(1, [1, 2], 2) == (1, (1,))
    assert remove_replica_from_isr(1, [1, 2], 1) == (NO_LEADER, (2,))
    assert remove_replica_from_isr(1, [1], 1) == (NO_LEADER, (1,))
    assert remove_replica_from_isr(1, [1, 2], 3) == (1, (1, 2))
