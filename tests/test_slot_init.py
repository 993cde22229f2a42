"""slot_init: frozen slots dataclasses built through a private mutable builder class behave exactly
as with the ``__init__`` dataclasses generates (values, defaults, frozenness, equality, hash, repr,
pickling), and the builder never shows.

Every class the product decorates is checked against its own dataclass-generated ``__init__``.
"""
from __future__ import annotations

import dataclasses
import pickle
from dataclasses import FrozenInstanceError, InitVar, dataclass, field

import pytest
from conftest import require_nonempty

import replica_core.fetcher.partition_states as partition_states
import replica_core.replication.fetch_metadata as fetch_metadata
import replica_core.replication.messages as messages
import replica_core.sim.broker as broker
import replica_core.storage.producer_state as producer_state
from replica_core._slot_init import dataclass_init, slot_init, slot_init_classes
from replica_core.records.validator import LogAppendInfo

DECORATED = (
    messages.LeaderAndIsrPartitionState, messages.LeaderAndIsrRequest,
    messages.LeaderAndIsrResponse, messages.ProducePartitionResponse, messages.FetchPartition,
    messages.FetchRequest, messages.FetchPartitionResponse, messages.FetchResponse,
    messages.OffsetForLeaderPartition, messages.OffsetsForLeaderEpochRequest,
    messages.ListOffsetsPartition, messages.AlterPartitionItem, messages.AlterPartitionRequest,
    messages.AlterPartitionResult, messages.InitialFetchState, fetch_metadata.FetchMetadata,
    producer_state.BatchMetadata, broker.ProduceRequest, broker.ProduceResponse,
    broker.Heartbeat, broker.Disconnected, partition_states.PartitionFetchState,
)
CLASSES = require_nonempty(DECORATED, "slot_init classes")


def test_the_product_decorates_exactly_these_classes() -> None:
    assert set(DECORATED) <= set(slot_init_classes())
    assert {c for c in slot_init_classes() if c.__module__.startswith("replica_core.")} \
        == set(DECORATED)


def _build(cls: type, init, *args, **kwargs):
    obj = object.__new__(cls)
    init(obj, *args, **kwargs)
    return obj


def _state(obj) -> list:
    """Every field's slot value (or the AttributeError's absence marker when unset)."""
    out = []
    for f in dataclasses.fields(obj):
        try:
            out.append((f.name, getattr(obj, f.name)))
        except AttributeError:
            out.append((f.name, "<unset>"))
    return out


def _values(cls: type) -> dict[str, str]:
    """A distinct (hashable) value for every init field."""
    return {f.name: f"<{f.name}>" for f in dataclasses.fields(cls) if f.init}


def _required(cls: type) -> list[str]:
    return [f.name for f in dataclasses.fields(cls) if f.init and f.default is dataclasses.MISSING
            and f.default_factory is dataclasses.MISSING]


def _same(a, b) -> None:
    assert type(a) is type(b)
    assert _state(a) == _state(b)
    assert a == b
    assert repr(a) == repr(b)
    try:
        ha = hash(a)
    except TypeError:  # a dict-valued field (LeaderAndIsrResponse): neither hashes
        with pytest.raises(TypeError):
            hash(b)
    else:
        assert ha == hash(b)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__qualname__)
def test_same_instance_as_the_dataclass_init(cls: type) -> None:
    original = dataclass_init(cls)
    assert original is not cls.__init__
    values = _values(cls)
    required = _required(cls)
    # every argument positionally, every argument by keyword, only the required ones
    _same(cls(*values.values()), _build(cls, original, *values.values()))
    _same(cls(**values), _build(cls, original, **values))
    only = {n: values[n] for n in required}
    fresh = cls(**only)
    _same(fresh, _build(cls, original, **only))
    for f in dataclasses.fields(cls):
        if f.init and f.name not in only and f.default is not dataclasses.MISSING:
            assert getattr(fresh, f.name) == f.default
    # a value differing in one field is unequal, as with the dataclass init
    name = next(iter(values))
    other = dict(values, **{name: "<other>"})
    assert (cls(**other) == cls(**values)) is (_build(cls, original, **other)
                                               == _build(cls, original, **values))
    # argument errors as before
    with pytest.raises(TypeError):
        cls(*values.values(), "<extra>")
    with pytest.raises(TypeError):
        cls(**values, not_a_field=1)
    if required:
        with pytest.raises(TypeError):
            cls()


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__qualname__)
def test_still_frozen_and_a_dataclass(cls: type) -> None:
    values = _values(cls)
    obj = cls(**values)
    for f in dataclasses.fields(cls):
        with pytest.raises(FrozenInstanceError):
            setattr(obj, f.name, "<changed>")
        with pytest.raises(FrozenInstanceError):
            delattr(obj, f.name)
    # an unknown name is refused too (CPython 3.11's frozen slots __setattr__ fails with a
    # TypeError from its super() call there; the dataclass init changes nothing about it)
    with pytest.raises((FrozenInstanceError, AttributeError, TypeError)):
        obj.not_a_field = 1  # type: ignore[attr-defined]
    assert _state(obj) == _state(cls(**values))
    name = next(iter(values))
    replaced = dataclasses.replace(obj, **{name: "<replaced>"})
    _same(replaced, _build(cls, dataclass_init(cls), **dict(values, **{name: "<replaced>"})))
    assert dataclasses.asdict(obj) == dataclasses.asdict(
        _build(cls, dataclass_init(cls), **values))
    _same(pickle.loads(pickle.dumps(obj)), obj)


def test_default_factory_gives_each_instance_its_own() -> None:
    a = messages.LeaderAndIsrResponse(messages.Errors.NONE)
    b = messages.LeaderAndIsrResponse(messages.Errors.NONE)
    assert a.partition_errors == {} and a.partition_errors is not b.partition_errors


def test_post_init_field_is_set() -> None:
    s = messages.LeaderAndIsrPartitionState("t", 3, 1, 2, 4, (2,), 0, (2, 1))
    assert s.tp == messages.TopicPartition("t", 3)
    assert s.is_new is False and s.topic_id is None and s.adding_replicas == ()
    with pytest.raises(FrozenInstanceError):
        s.tp = messages.TopicPartition("u", 0)  # type: ignore[misc]


def test_fetch_partition_defaults_written_by_hand() -> None:
    tp = messages.TopicPartition("t", 0)
    p = messages.FetchPartition(tp, 7, 1024)
    assert (p.tp, p.fetch_offset, p.partition_max_bytes, p.log_start_offset,
            p.current_leader_epoch, p.last_fetched_epoch) == (tp, 7, 1024, -1, -1, -1)
    assert repr(p) == ("FetchPartition(tp=TopicPartition(topic='t', partition=0), "
                       "fetch_offset=7, partition_max_bytes=1024, log_start_offset=-1, "
                       "current_leader_epoch=-1, last_fetched_epoch=-1)")


# --- the mechanism on shapes the product does not use (yet) -----------------------------------
def test_keyword_only_init_false_and_factories() -> None:
    @slot_init
    @dataclass(frozen=True, slots=True)
    class Shape:
        a: int
        b: list = field(default_factory=list)
        c: int = field(default=5, init=False)
        d: list = field(default_factory=lambda: [1], init=False)
        e: int = field(default=9, kw_only=True)
        f: str = field(kw_only=True, default="x")

    original = dataclass_init(Shape)
    for args, kwargs in (((1,), {}), ((1, [2]), {"e": 3}), ((), {"a": 1, "f": "y", "b": []})):
        _same(Shape(*args, **kwargs), _build(Shape, original, *args, **kwargs))
    s = Shape(1)
    assert (s.a, s.b, s.c, s.d, s.e, s.f) == (1, [], 5, [1], 9, "x")
    with pytest.raises(TypeError):
        Shape(1, [], 3)  # e is keyword-only
    assert Shape(1).b is not Shape(1).b


def test_post_init_runs_on_the_frozen_instance() -> None:
    seen = []

    @slot_init
    @dataclass(frozen=True, slots=True)
    class Checked:
        a: int

        def __post_init__(self) -> None:
            seen.append(type(self))
            self.a = 2  # refused, as with the dataclass's own __init__

    with pytest.raises(FrozenInstanceError):
        Checked(1)
    assert seen == [Checked]


def test_a_factory_that_raises_leaves_no_instance_half_built() -> None:
    def boom() -> list:
        raise ValueError("boom")

    @slot_init
    @dataclass(frozen=True, slots=True)
    class Failing:
        a: int
        b: list = field(default_factory=boom)

    with pytest.raises(ValueError, match="boom"):
        Failing(1)
    assert Failing(1, []).b == []


def test_subclass_inheriting_the_init_keeps_its_own_class() -> None:
    @slot_init
    @dataclass(frozen=True, slots=True)
    class Parent:
        a: int
        b: list = field(default_factory=list)
        c: int = field(default=5, init=False)

    class SameLayout(Parent):
        __slots__ = ()

    class MoreSlots(Parent):
        __slots__ = ("extra",)

    for sub in (SameLayout, MoreSlots):
        obj = sub(1)
        assert type(obj) is sub
        assert (obj.a, obj.b, obj.c) == (1, [], 5)
        assert sub(1, [2]).b == [2] and sub(1).b is not obj.b
        with pytest.raises(FrozenInstanceError):
            obj.a = 2  # type: ignore[misc]
    assert type(Parent(1)) is Parent


def test_rejects_what_it_does_not_fit() -> None:
    @dataclass(slots=True)
    class Mutable:
        a: int

    @dataclass(frozen=True)
    class NoSlots:
        a: int

    @dataclass(frozen=True, slots=True)
    class WithInitVar:
        a: int
        scale: InitVar[int] = 1

    @dataclass(frozen=True, slots=True, init=False)
    class OwnInit:
        a: int

        def __init__(self, a: int) -> None:
            object.__setattr__(self, "a", a)

    class NotADataclass:
        pass

    for cls, why in ((Mutable, "for frozen dataclasses"), (NoSlots, "is not a slot"),
                     (WithInitVar, "InitVar"), (OwnInit, "its own __init__"),
                     (NotADataclass, "needs a dataclass")):
        with pytest.raises(TypeError, match=why):
            slot_init(cls)
    assert LogAppendInfo not in slot_init_classes()  # mutable: the log fills it in (§2.4)


def test_log_append_info_has_slots_and_stays_mutable() -> None:
    info = LogAppendInfo(0, 4, 1, 100, 4, -1, "none", 80, 1, 5, 4, True)
    info.first_offset = 10
    info.last_offset = 14
    assert (info.first_offset, info.num_messages) == (10, 5)
    with pytest.raises(AttributeError):
        info.not_a_field = 1  # type: ignore[attr-defined]
    assert pickle.loads(pickle.dumps(info)) == info
