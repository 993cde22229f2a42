"""KRaft's striped replica placer (metadata/placement/StripedReplicaPlacer.java) and its use by
the controller: Kafka's own test vectors (StripedReplicaPlacerTest, drawn from its MockRandom),
then the rules over many seeds — replicas span min(RF, racks) racks, leaders spread evenly,
leaders never fenced, placement a function of the seed — and rack-less clusters placed as
before."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from replica_core.controller import Controller, assign_replicas
from replica_core.controller.replica_placer import (
    BrokerList,
    RackList,
    UsableBroker,
    place_replicas,
)
from replica_core.errors import Errors, InvalidReplicationFactorError
from replica_core.replication.messages import TopicPartition
from replica_core.sim.cluster import Cluster

U = UsableBroker
MASK64 = (1 << 64) - 1


class MockRandom:
    """Kafka's test generator (server-common ``MockRandom``: a 64-bit LCG seeded with 17) behind
    ``java.util.Random.nextInt(bound)``, so Kafka's expected placements can be replayed."""

    def __init__(self, state: int = 17) -> None:
        self.state = state

    def _next(self, bits: int) -> int:
        self.state = (self.state * 2862933555777941757 + 3037000493) & MASK64
        value = self.state >> (64 - bits)
        return value - (1 << 32) if value >= (1 << 31) else value

    def next_int(self, bound: int) -> int:
        r = self._next(31)
        m = bound - 1
        if bound & m == 0:
            return (bound * r) >> 31
        u = r
        while True:
            r = u % bound
            if u - r + m < (1 << 31):
                return r
            u = self._next(31)


# --- Kafka's vectors ----------------------------------------------------------------------------
def test_broker_list_round_robin_per_epoch():
    assert BrokerList().next(1) == -1
    brokers = BrokerList([0, 1, 2, 3])
    assert [brokers.next(0) for _ in range(6)] == [0, 1, 2, 3, -1, -1]
    assert [brokers.next(1) for _ in range(5)] == [1, 2, 3, 0, -1]


def test_single_rack_avoids_the_fenced_broker_while_it_can():
    racks = RackList(MockRandom(), [U(3), U(1, None, True), U(0), U(4), U(2)])
    assert (racks.num_total, racks.num_unfenced, racks.rack_names) == (5, 4, [None])
    for bad in (0, -1):
        with pytest.raises(InvalidReplicationFactorError):
            racks.place(bad)
    assert [racks.place(4) for _ in range(5)] == [
        [3, 4, 0, 2], [4, 0, 2, 3], [0, 2, 3, 4], [2, 3, 4, 0], [0, 4, 3, 2]]


def test_fenced_broker_used_when_needed_but_never_as_leader():
    racks = RackList(MockRandom(), [U(3), U(1, None, True), U(2)])
    assert [racks.place(3) for _ in range(4)] == [[3, 2, 1], [2, 3, 1], [3, 2, 1], [2, 3, 1]]


def test_multiple_racks():
    racks = RackList(MockRandom(), [U(11, "1"), U(10, "1"), U(30, "3"), U(31, "3"), U(21, "2"),
                                    U(20, "2", True)])
    assert racks.rack_names == ["1", "2", "3"]
    assert [racks.place(4) for _ in range(3)] == [
        [11, 21, 31, 10], [21, 30, 10, 20], [31, 11, 21, 30]]


def test_racks_with_only_fenced_brokers():
    racks = RackList(MockRandom(), [U(11, "1"), U(10, "1"), U(30, "3", True), U(31, "3", True),
                                    U(20, "2", True), U(21, "2", True), U(41, "4"),
                                    U(40, "4", True)])
    assert (racks.num_total, racks.num_unfenced) == (8, 3)
    assert [racks.place(4) for _ in range(3)] == [
        [41, 11, 21, 30], [10, 20, 31, 41], [41, 21, 30, 11]]


def test_successful_placement_and_even_distribution():
    assert place_replicas(5, 3, [U(0), U(3), U(2), U(1)], MockRandom()) == [
        (2, 3, 0), (3, 0, 1), (0, 1, 2), (1, 2, 3), (1, 0, 2)]
    counts = Counter(place_replicas(200, 2, [U(0), U(1), U(2), U(3)], MockRandom()))
    assert counts == {(0, 1): 14, (0, 2): 22, (0, 3): 14, (1, 0): 17, (1, 2): 17, (1, 3): 16,
                      (2, 0): 13, (2, 1): 17, (2, 3): 20, (3, 0): 20, (3, 1): 19, (3, 2): 11}


def test_single_unfenced_broker_takes_every_partition():
    assert place_replicas(3, 1, [U(0), U(1, None, True)], MockRandom()) == [(0,), (0,), (0,)]


@pytest.mark.parametrize("rf, brokers, message", [
    (1, [U(11, "1", True), U(10, "1", True)], "All brokers are currently fenced."),
    (3, [U(11, "1"), U(10, "1")],
     "The target replication factor of 3 cannot be reached because only 2 broker(s) are "
     "registered."),
    (0, [U(11, "1"), U(10, "1")],
     "Invalid replication factor 0: the replication factor must be positive."),
])
def test_placement_errors_are_kafkas(rf, brokers, message):
    with pytest.raises(InvalidReplicationFactorError) as info:
        place_replicas(1, rf, brokers, MockRandom())
    assert str(info.value) == message
    assert info.value.code == Errors.INVALID_REPLICATION_FACTOR == 38


# --- the rules, over seeds ----------------------------------------------------------------------
def cluster_of(racks: dict[str, int]) -> list[UsableBroker]:
    out, next_id = [], 1
    for name, size in racks.items():
        for _ in range(size):
            out.append(U(next_id, name))
            next_id += 1
    return out


EVEN = [({"a": 2, "b": 2, "c": 2}, 3), ({"a": 3, "b": 3, "c": 3}, 2),
        ({"a": 4, "b": 4, "c": 4, "d": 4}, 3), ({"x": 1, "y": 1, "z": 1}, 3)]


@pytest.mark.parametrize("layout, rf", [*EVEN, ({"a": 2, "b": 2}, 3), ({"a": 2, "b": 2}, 2)])
@pytest.mark.parametrize("seed", [0, 1, 7, 42])
def test_replicas_span_min_rf_racks(layout, rf, seed):
    brokers = cluster_of(layout)
    rack = {b.id: b.rack for b in brokers}
    placed = place_replicas(12 * len(brokers), rf, brokers, np.random.default_rng(seed))
    assert len(placed) == 12 * len(brokers)
    for replicas in placed:
        assert len(set(replicas)) == rf  # never two replicas on one broker
        assert len({rack[b] for b in replicas}) == min(rf, len(layout))


@pytest.mark.parametrize("layout, rf", EVEN)
@pytest.mark.parametrize("seed", [0, 1, 7, 42])
def test_leaders_and_replicas_spread_evenly_over_equal_racks(layout, rf, seed):
    """Racks of one size: over 12 placements per broker, every broker leads 12 partitions and
    holds 12·RF replicas. (Two racks of two brokers do not balance leaders: a rack's round
    robin advances once per partition and it leads every other one, so the same broker leads
    until the next shuffle — Kafka's placer does the same.)"""
    brokers = cluster_of(layout)
    placed = place_replicas(12 * len(brokers), rf, brokers, np.random.default_rng(seed))
    assert Counter(r[0] for r in placed) == {b.id: 12 for b in brokers}
    assert Counter(b for r in placed for b in r) == {b.id: 12 * rf for b in brokers}


def test_placement_is_a_function_of_the_seed():
    brokers = cluster_of({"a": 2, "b": 2, "c": 2})
    one = place_replicas(60, 3, brokers, np.random.default_rng(5))
    assert one == place_replicas(60, 3, list(reversed(brokers)), np.random.default_rng(5))
    assert one != place_replicas(60, 3, brokers, np.random.default_rng(6))


def test_leader_is_never_fenced():
    brokers = [U(1, "a"), U(2, "a", True), U(3, "b", True), U(4, "b"), U(5, "c", True),
               U(6, "c")]
    placed = place_replicas(90, 3, brokers, np.random.default_rng(3))
    assert {r[0] for r in placed} == {1, 4, 6}
    assert all(len({(b + 1) // 2 for b in r}) == 3 for r in placed)  # racks a, b, c each once


# --- in the controller and the simulated cluster -------------------------------------------------
def test_controller_without_racks_keeps_the_rack_unaware_assignment():
    ctrl = Controller()
    for b in (1, 2, 3, 4, 5):
        ctrl.register_broker(b, 0)
    ctrl.create_topic("t", 20, 3, placement_random=np.random.default_rng(1))
    got = [ctrl.partitions[TopicPartition("t", p)].replicas for p in range(20)]
    # AdminUtils' rack-unaware assignment, by hand for the first round (start index 0, shift 0)
    assert got[:5] == [(1, 2, 3), (2, 3, 4), (3, 4, 5), (4, 5, 1), (5, 1, 2)]
    assert got == assign_replicas(20, 3, [1, 2, 3, 4, 5])


def test_controller_places_rack_aware_from_registered_racks():
    ctrl = Controller()
    racks = {1: "a", 2: "b", 3: "c", 4: "a", 5: "b", 6: "c"}
    for b, r in racks.items():
        ctrl.register_broker(b, 0, rack=r)
    ctrl.create_topic("t", 30, 3, placement_random=np.random.default_rng(9))
    regs = [ctrl.partitions[TopicPartition("t", p)] for p in range(30)]
    assert all(sorted(racks[b] for b in reg.replicas) == ["a", "b", "c"] for reg in regs)
    assert all(reg.leader == reg.replicas[0] for reg in regs)
    with pytest.raises(InvalidReplicationFactorError):
        ctrl.create_topic("u", 1, 7, placement_random=np.random.default_rng(9))


def test_simulated_cluster_registers_racks_and_places_by_them():
    racks = ["a", "b", "c", "a", "b", "c"]
    c = Cluster(6, seed=11, racks=racks)
    assert {b: r.rack for b, r in c.controller.brokers.items()} == dict(enumerate(racks, 1))
    c.create_topic("t", 24, 3)
    placed = [c.replicas_of(TopicPartition("t", p)) for p in range(24)]
    assert all(len({racks[b - 1] for b in r}) == 3 for r in placed)
    again = Cluster(6, seed=11, racks=racks)
    again.create_topic("t", 24, 3)
    assert placed == [again.replicas_of(TopicPartition("t", p)) for p in range(24)]
    plain = Cluster(6, seed=11)
    plain.create_topic("t", 24, 3)
    assert [plain.replicas_of(TopicPartition("t", p)) for p in range(24)] == \
        assign_replicas(24, 3, [1, 2, 3, 4, 5, 6])
