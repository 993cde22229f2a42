"""Clients of a simulated cluster: producers at a seeded Poisson rate per partition, with Kafka's
producer behaviour on errors (metadata refresh on NOT_LEADER_OR_FOLLOWER and timeouts, retries
after ``retry.backoff.ms`` until ``delivery.timeout.ms``), and an optional consumer of committed
data.

The workload's producer follows Kafka's producer configs (:mod:`~replica_core.sim.producer_config`):
at most ``max.in.flight.requests.per.connection`` batches of a partition are in flight (the
simulated producer sends one batch per request, so the per-connection limit is applied per
partition), a failed batch goes back to the head of its partition's queue and is retried after
its backoff (nothing behind it overtakes it), up to ``retries`` times within
``delivery.timeout.ms``. With ``enable.idempotence`` (Kafka's default) the producer has a producer
id (:meth:`~replica_core.sim.cluster.Cluster.init_producer_id`, epoch 0) and gives each batch the
next sequence of its partition when first sent; a retry re-sends the same bytes, so a leader that
already has the batch answers with its original offsets instead of writing it twice. As Kafka's
``TransactionManager``, a retried batch is sent only when its partition has nothing else in flight
(retries go out one at a time, in sequence order), ``OUT_OF_ORDER_SEQUENCE_NUMBER`` is retried
while an earlier batch of the partition is unresolved, and a batch that fails for good bumps the
producer epoch, after which every partition's sequences restart at 0 (KIP-360) — but only once
no batch sent under the old epoch is still in flight or waiting to be retried (Kafka bumps only
without in-flight batches), and no new batch goes out meanwhile: a batch whose first attempt may
already be in the log is never re-sent under a new epoch, where the leader could not tell it
from a new one.

Every acknowledged batch goes to the invariant checker's ledger as (partition, offset range,
digest of its records, acks, ISR size at the time), which is how durability is checked.
Record values are unique per (partition, batch, record), so a digest identifies one batch.
"""
from __future__ import annotations

import struct
from collections import deque
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from replica_core.errors import Errors
from replica_core.records import build_batch
from replica_core.records import kernels as _batch_kernels
from replica_core.replication.messages import (
    ISOLATION_READ_UNCOMMITTED,
    FetchPartition,
    FetchRequest,
    TopicPartition,
)
from replica_core.sim.broker import CONTROLLER_NODE, ConsumerFetch, ProduceRequest, is_failure
from replica_core.sim.cluster import MetadataRequest, ProduceHandle
from replica_core.sim.invariants import LogScan, ScanDigests, records_digest, scan_log
from replica_core.sim.producer_config import INT32_MAX, ProducerSettings, producer_settings
from replica_core.sim.scenario import WORKLOAD_KEYS, parse_acks

if TYPE_CHECKING:
    from replica_core.sim.cluster import Cluster

_BASE_TS = struct.Struct(">q")
_PRODUCER_HEADER = struct.Struct(">qhi")  # producer id, producer epoch, base sequence (at 43)
_MAX_TS_AT = 35
_COL_POSITION = _batch_kernels.COL_POSITION
_COL_SIZE = _batch_kernels.COL_SIZE
_COL_RECORD_COUNT = _batch_kernels.COL_RECORD_COUNT
_COL_BASE_OFFSET = _batch_kernels.COL_BASE_OFFSET
_COL_LAST_OFFSET_DELTA = _batch_kernels.COL_LAST_OFFSET_DELTA
RETRIABLE = frozenset({
    Errors.NOT_LEADER_OR_FOLLOWER, Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.LEADER_NOT_AVAILABLE,
    Errors.NOT_ENOUGH_REPLICAS, Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    Errors.REQUEST_TIMED_OUT, Errors.NETWORK_EXCEPTION, Errors.KAFKA_STORAGE_ERROR,
    Errors.FENCED_LEADER_EPOCH, Errors.UNKNOWN_LEADER_EPOCH})
REFRESH_METADATA = frozenset({
    Errors.NOT_LEADER_OR_FOLLOWER, Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.LEADER_NOT_AVAILABLE,
    Errors.NETWORK_EXCEPTION, Errors.REQUEST_TIMED_OUT, Errors.FENCED_LEADER_EPOCH,
    Errors.UNKNOWN_LEADER_EPOCH, Errors.KAFKA_STORAGE_ERROR})


class _Batch:
    __slots__ = ("handle", "pid", "records", "digest", "acks", "timeout_ms", "retries",
                 "on_done", "epoch", "seq", "ready_ms", "in_flight")

    def __init__(self, handle: ProduceHandle, pid: int, records: bytes | bytearray, acks: int,
                 timeout_ms: int, retries: int | None, on_done: Any) -> None:
        self.handle = handle
        self.pid = pid
        self.records = records
        self.digest = records_digest(records)
        self.acks = acks
        self.timeout_ms = timeout_ms
        self.retries = retries
        self.on_done = on_done
        self.epoch = -1  # producer epoch and base sequence stamped at first send (idempotent)
        self.seq = -1
        self.ready_ms = 0  # a retry waits in its queue until then
        self.in_flight = False


class _PartitionQueue:
    """One partition's batches at the producer: waiting (oldest first; retries at the head)
    and in flight; with idempotence its next sequence and the unresolved stamped batches."""

    __slots__ = ("pending", "in_flight", "next_seq", "epoch", "unresolved", "wake_at",
                 "draining")

    def __init__(self, epoch: int) -> None:
        self.pending: deque[_Batch] = deque()
        self.in_flight = 0
        self.next_seq = 0
        self.epoch = epoch
        self.unresolved: set[tuple[int, int]] = set()  # (epoch, base sequence)
        self.wake_at = -1
        self.draining = False


class Producer:
    """One producer client (network node ``client_id``).

    ``metadata="network"`` asks the controller node over the network (refreshed on errors);
    ``"controller"`` reads the controller's current view directly (scripted scenarios, where
    each step should hit the leader of the moment).
    """

    __slots__ = ("cluster", "loop", "network", "client_id", "metadata", "request_timeout_ms",
                 "retry_backoff_ms", "delivery_timeout_ms", "retry_backoff_max_ms", "rng",
                 "leaders", "_metadata_in_flight", "sent_batches", "acked_batches",
                 "failed_batches", "failed_records", "acked_records", "retries", "latencies_ms",
                 "errors", "settings", "max_in_flight", "idempotent", "epoch_bumps",
                 "_bump_wanted", "_queues", "producer_epoch", "producer_id", "__weakref__")

    def __init__(self, cluster: Cluster, client_id: int, *, metadata: str = "network",
                 request_timeout_ms: int | None = None, retry_backoff_ms: int | None = None,
                 delivery_timeout_ms: int | None = None,
                 settings: ProducerSettings | None = None) -> None:
        self.cluster = cluster
        self.loop = cluster.loop
        self.network = cluster.network
        self.client_id = client_id
        self.metadata = metadata
        self.request_timeout_ms = request_timeout_ms or cluster.request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms or cluster.retry_backoff_ms
        self.delivery_timeout_ms = delivery_timeout_ms or cluster.delivery_timeout_ms
        self.retry_backoff_max_ms = cluster.retry_backoff_max_ms
        self.rng = cluster.loop.spawn_rng()
        self.leaders: np.ndarray | None = None
        self._metadata_in_flight = False
        self.sent_batches = 0
        self.acked_batches = 0
        self.failed_batches = 0
        self.failed_records = 0
        self.acked_records = 0
        self.retries = 0
        self.latencies_ms: list[int] = []
        self.errors: dict[str, int] = {}
        # Kafka's producer configs; None: every batch is sent at once, retried on its own
        # (the hand-driven client of scripted scenarios and tests)
        self.settings = settings
        self.max_in_flight = None if settings is None else settings.max_in_flight
        self.idempotent = settings is not None and settings.enable_idempotence
        self.producer_id, self.producer_epoch = (cluster.init_producer_id() if self.idempotent
                                                 else (-1, -1))
        self.epoch_bumps = 0
        self._bump_wanted = False
        """A batch failed for good: bump the epoch once nothing of the old one is unresolved."""
        self._queues: dict[int, _PartitionQueue] = {}

    # ---- metadata ------------------------------------------------------------------------------
    def _leader(self, pid: int, tp: TopicPartition) -> int:
        if self.metadata == "controller":
            return self.cluster.leader_and_isr(tp)[0]
        if self.leaders is None or pid >= len(self.leaders):
            self.refresh_metadata()
            return -1
        return int(self.leaders[pid])

    def refresh_metadata(self) -> None:
        """Ask the controller for the leaders (one request at a time)."""
        if self.metadata == "controller" or self._metadata_in_flight:
            return
        self._metadata_in_flight = True

        def on_answer(answer: Any) -> None:
            self._metadata_in_flight = False
            if not is_failure(answer):
                self.leaders = answer.leaders

        self.network.request(self.client_id, CONTROLLER_NODE, MetadataRequest(), 32, on_answer,
                             timeout_ms=self.request_timeout_ms)

    # ---- sending -------------------------------------------------------------------------------
    def produce(self, tp: TopicPartition, values: Sequence[bytes], *, acks: int = -1,
                keys: Sequence[bytes | None] | None = None, retries: int | None = 0,
                timeout_ms: int | None = None, on_done: Any = None) -> ProduceHandle:
        """Send one batch of ``values``; ``retries=None`` retries until the delivery timeout."""
        records = build_batch(list(values), keys=keys, now_ms=self.loop.now)
        return self.send(tp, records, len(values), acks=acks, retries=retries,
                         timeout_ms=timeout_ms, on_done=on_done)

    def send(self, tp: TopicPartition, records: bytes | bytearray, count: int, *, acks: int,
             retries: int | None, timeout_ms: int | None = None, on_done: Any = None
             ) -> ProduceHandle:
        """Queue one batch for ``tp`` (``records``: one v2 batch of ``count`` records; an
        idempotent producer stamps its header and CRC at its first send, so it also takes it
        as a ``bytearray`` not stamped yet)."""
        pid = self.cluster.tp_ids[tp]
        handle = ProduceHandle(tp, count, acks, self.loop.clock.now_ms)
        batch = _Batch(handle, pid, records, acks, timeout_ms or self.request_timeout_ms,
                       retries, on_done)
        self.sent_batches += 1
        if self.max_in_flight is None:
            self._attempt(batch)
            return handle
        q = self._queues.get(pid)
        if q is None:
            q = self._queues[pid] = _PartitionQueue(self.producer_epoch)
        q.pending.append(batch)
        self._drain(q)
        return handle

    # ---- the per-partition queue (Kafka's RecordAccumulator / Sender) -----------------------
    def _drain(self, q: _PartitionQueue) -> None:
        """Send what the partition may send now: the head of its queue while fewer than
        ``max.in.flight.requests.per.connection`` are in flight, a retry only when its backoff
        is over (and, idempotent, only with nothing else in flight); batches past
        ``delivery.timeout.ms`` expire in the queue."""
        if q.draining:
            return
        if self._bump_wanted and self._old_epoch_settled():
            self._bump_epoch()
            return
        q.draining = True
        try:
            now = self.loop.clock.now_ms
            limit = self.max_in_flight or 1
            while q.pending and q.in_flight < limit:
                b = q.pending[0]
                if now >= b.handle.sent_ms + self.delivery_timeout_ms:
                    q.pending.popleft()
                    self._complete(b, Errors.REQUEST_TIMED_OUT, -1, 0)
                    continue
                if b.ready_ms > now:
                    if q.wake_at <= now or q.wake_at > b.ready_ms:
                        q.wake_at = b.ready_ms
                        self.loop.call_at(b.ready_ms, self._drain, q)
                    break
                if self.idempotent and b.handle.attempts > 0 and q.in_flight > 0:
                    break  # a retry goes out alone, in sequence order
                if self._bump_wanted and b.handle.attempts == 0:
                    break  # nothing new until the epoch is bumped
                q.pending.popleft()
                if self.idempotent and b.epoch != self.producer_epoch:
                    self._stamp(q, b)
                q.in_flight += 1
                b.in_flight = True
                self._attempt(b)
        finally:
            q.draining = False

    def _stamp(self, q: _PartitionQueue, b: _Batch) -> None:
        """Write the producer id, epoch and the partition's next sequence into the batch
        header (and its CRC): once, at its first send (again only after an epoch bump)."""
        if q.epoch != self.producer_epoch:
            q.epoch, q.next_seq = self.producer_epoch, 0
        if b.epoch >= 0:
            q.unresolved.discard((b.epoch, b.seq))
        b.epoch, b.seq = self.producer_epoch, q.next_seq
        q.next_seq = (q.next_seq + b.handle.count) % (INT32_MAX + 1)
        q.unresolved.add((b.epoch, b.seq))
        records = b.records
        # a batch not sent yet may come as a bytearray, its CRC not stamped (the workload
        # leaves that to this stamp, Workload._unstamped_batch): written in place
        buf = records if type(records) is bytearray else bytearray(records)
        _PRODUCER_HEADER.pack_into(buf, 43, self.producer_id, b.epoch, b.seq)
        attributes = records[21] << 8 | records[22]  # big-endian int16 at 21
        max_ts = _BASE_TS.unpack_from(records, _MAX_TS_AT)[0]
        _batch_kernels.stamp_batch(buf, 0, 0, -1, attributes, max_ts)
        b.records = bytes(buf)

    def _requeue(self, q: _PartitionQueue, batch: _Batch) -> None:
        """A failed batch back into its queue: in sequence order when idempotent (Kafka's
        ``insertInSequenceOrder``), else at the head (``addFirst``)."""
        if not self.idempotent or batch.epoch < 0:
            q.pending.appendleft(batch)
            return
        key = (batch.epoch, batch.seq)
        for i, other in enumerate(q.pending):
            if other.epoch < 0 or (other.epoch, other.seq) > key:
                q.pending.insert(i, batch)
                return
        q.pending.append(batch)

    def _earlier_unresolved(self, batch: _Batch) -> bool:
        q = self._queues.get(batch.pid)
        return q is not None and any(e == batch.epoch and s < batch.seq
                                     for e, s in q.unresolved)

    def _old_epoch_settled(self) -> bool:
        """No batch sent under the current epoch is in flight or waiting for its retry (its
        earlier attempt may be in the log: re-sent under a new epoch, the leader could not tell
        it from a new batch)."""
        epoch = self.producer_epoch
        return all(q.in_flight == 0 and not any(b.epoch == epoch and b.handle.attempts > 0
                                                for b in q.pending)
                   for q in self._queues.values())

    def _bump_epoch(self) -> None:
        """A new epoch, every partition's sequences from 0 (KIP-360:
        ``bumpIdempotentEpochAndResetIdIfNeeded``), then every partition may send again."""
        self.producer_epoch += 1
        self.epoch_bumps += 1
        self._bump_wanted = False
        for q in list(self._queues.values()):
            if q.pending:
                self._drain(q)

    def _attempt(self, batch: _Batch) -> None:
        handle = batch.handle
        handle.attempts += 1
        leader = self._leader(batch.pid, handle.tp)
        if leader < 0 or leader not in self.cluster.brokers:
            self._retry_or_fail(batch, Errors.LEADER_NOT_AVAILABLE)
            return
        msg = ProduceRequest(handle.tp, batch.records, batch.acks, batch.timeout_ms)
        size = 64 + len(batch.records)
        if batch.acks == 0:
            self.cluster.send_one_way(self.client_id, leader, msg, size)
            self._complete(batch, None, -1, 0)
            return
        self.network.request(self.client_id, leader, msg, size,
                             lambda answer: self._on_answer(batch, answer, leader),
                             timeout_ms=self.request_timeout_ms)

    def _on_answer(self, batch: _Batch, answer: Any, leader: int = -1) -> None:
        if is_failure(answer):
            self._retry_or_fail(batch, Errors.NETWORK_EXCEPTION if not hasattr(answer, "args")
                                else Errors.REQUEST_TIMED_OUT)
            return
        if answer.error_code == Errors.NONE:
            self._complete(batch, None, answer.base_offset, answer.isr_size, leader)
        else:
            self._retry_or_fail(batch, Errors(answer.error_code))

    def _retry_or_fail(self, batch: _Batch, error: Errors) -> None:
        self.errors[error.name] = self.errors.get(error.name, 0) + 1
        if error in REFRESH_METADATA or error == Errors.LEADER_NOT_AVAILABLE:
            self.refresh_metadata()
        retriable = error in RETRIABLE or error == Errors.LEADER_NOT_AVAILABLE or (
            # TransactionManager.canRetry: a later batch rejected because an earlier one of
            # its partition has not landed yet
            error == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER and self.idempotent
            and self._earlier_unresolved(batch))
        handle = batch.handle
        retries_left = batch.retries is None or handle.attempts <= batch.retries
        deadline = handle.sent_ms + self.delivery_timeout_ms
        # exponential backoff with ±20 % jitter (KIP-580: retry.backoff.ms .. retry.backoff.max.ms)
        backoff = min(self.retry_backoff_ms * 2 ** min(handle.attempts - 1, 20),
                      max(self.retry_backoff_ms, self.retry_backoff_max_ms))
        backoff = int(backoff * (0.8 + 0.4 * float(self.rng.random())))
        if retriable and retries_left and self.loop.now + backoff < deadline:
            self.retries += 1
            if self.max_in_flight is None:
                self.loop.call_later(backoff, self._attempt, batch)
                return
            q = self._queues[batch.pid]
            q.in_flight -= 1
            batch.in_flight = False
            batch.ready_ms = self.loop.now + backoff
            self._requeue(q, batch)
            self._drain(q)
            return
        self._complete(batch, error, -1, 0)

    def _complete(self, batch: _Batch, error: Errors | None, base_offset: int,
                  isr_size: int, leader: int = -1) -> None:
        handle = batch.handle
        now = self.loop.clock.now_ms
        handle.done = True
        handle.error = error
        handle.base_offset = base_offset
        if error is None:
            handle.acked_ms = now
            if batch.acks != 0:
                self.acked_batches += 1
                self.acked_records += handle.count
                self.latencies_ms.append(now - handle.sent_ms)
                self.cluster.checker.ledger.record(
                    batch.pid, base_offset, handle.count, batch.digest, acks=batch.acks,
                    isr_size=isr_size, ack_ms=now, leader=leader)
        else:
            self.failed_batches += 1
            self.failed_records += handle.count
        batch.records = b""
        if self.max_in_flight is not None:
            q = self._queues[batch.pid]
            if batch.in_flight:
                batch.in_flight = False
                q.in_flight -= 1
            if batch.epoch >= 0:
                q.unresolved.discard((batch.epoch, batch.seq))
                if error is not None and batch.epoch == self.producer_epoch:
                    self._bump_wanted = True
        if batch.on_done is not None:
            batch.on_done(handle)
        if self.max_in_flight is not None:
            self._drain(self._queues[batch.pid])


class Workload:
    """Producers on every partition of ``topics`` at ``batches_per_second`` each (one merged
    Poisson process), optionally a consumer reading committed data.

    Spec keys (the scenario's ``[workload]`` table): ``batches_per_second``,
    ``records_per_batch``, ``record_bytes``, ``acks``, ``keys`` (distinct keys, 0 = null keys),
    ``consumers`` (bool), ``consumer_poll_ms``.
    """

    KEYS = WORKLOAD_KEYS

    def __init__(self, cluster: Cluster, spec: Mapping[str, Any], *,
                 topics: Sequence[str] | None = None, client_id: int = 1000) -> None:
        unknown = set(spec) - self.KEYS
        if unknown:
            from replica_core.errors import InvalidConfigurationError

            raise InvalidConfigurationError(f"unknown workload keys: {sorted(unknown)}")
        self.cluster = cluster
        self.loop = cluster.loop
        self.rng = cluster.loop.spawn_rng()
        self.rate = float(spec.get("batches_per_second", 1.0))
        self.records_per_batch = max(1, int(spec.get("records_per_batch", 10)))
        self.record_bytes = max(1, int(spec.get("record_bytes", 100)))
        self.acks = parse_acks(spec.get("acks", "all"))
        self.n_keys = int(spec.get("keys", 0))
        wanted = None if topics is None else set(topics)
        self.tps = [tp for tp in cluster.tps if wanted is None or tp.topic in wanted]
        self.pids = [int(cluster.tp_ids[tp]) for tp in self.tps]
        self.settings = producer_settings(cluster.config, self.acks, cluster.request_timeout_ms)
        self.retries = None if self.settings.retries == INT32_MAX else self.settings.retries
        self.producer = Producer(cluster, client_id, settings=self.settings,
                                 delivery_timeout_ms=self.settings.delivery_timeout_ms)
        cluster.client_ids.append(client_id)
        self.seq = [0] * len(cluster.tps)  # next batch number per partition id
        self.consumer: Consumer | None = None
        if spec.get("consumers", False):
            self.consumer = Consumer(cluster, client_id + 1, self.tps,
                                     poll_ms=int(spec.get("consumer_poll_ms", 1000)))
        self._until = 0
        self._gaps: list[float] = []
        self._picks: list[int] = []
        self._k = 0
        self._due = 0.0
        self._pad = b"." * self.record_bytes
        self._template: bytes | None = None
        self._value_pos: list[int] = []
        self._key_pos: list[int] = []
        self._pieces: list[bytes] = []
        self._attributes = 0
        self._make_template()

    @property
    def total_rate(self) -> float:
        """Batches per simulated second over all partitions."""
        return self.rate * len(self.tps)

    def start(self, until_ms: int) -> None:
        """Produce from now until ``until_ms``."""
        self._until = until_ms
        self._due = float(self.loop.now)
        self.producer.refresh_metadata()
        if self.total_rate > 0 and self.tps:
            self._schedule()
        if self.consumer is not None:
            self.consumer.start(until_ms)

    def _schedule(self) -> None:
        if self._k >= len(self._gaps):
            # draw arrivals in blocks: one generator call per 1024 batches
            self._gaps = self.rng.exponential(1000.0 / self.total_rate, 1024).tolist()
            self._picks = self.rng.integers(0, len(self.tps), 1024).tolist()
            self._k = 0
        gap = self._gaps[self._k]
        self._due += gap
        at = int(self._due)
        if at >= self._until:
            return
        self.loop.post_at(at, self._arrival)

    def _arrival(self) -> None:
        k = self._k
        self._k = k + 1
        i = self._picks[k]
        tp = self.tps[i]
        pid = self.pids[i]
        seq = self.seq[pid]
        self.seq[pid] = seq + 1
        records = (self._unstamped_batch(pid, seq) if self.producer.idempotent
                   else self._batch(pid, seq))
        self.producer.send(tp, records, self.records_per_batch, acks=self.acks,
                           retries=self.retries)
        self._schedule()

    def _batch(self, pid: int, seq: int) -> bytes:
        """A batch whose records carry ``pid:seq:record`` (so its digest is unique): a
        template with the ids patched in and the header re-stamped (new CRC) — what
        ``build_batch`` would produce, without encoding every record again."""
        buf = self._unstamped_batch(pid, seq)
        if type(buf) is bytes:
            return buf
        _batch_kernels.stamp_batch(buf, 0, 0, -1, self._attributes, self.loop.clock.now_ms)
        return bytes(buf)

    def _unstamped_batch(self, pid: int, seq: int) -> bytes | bytearray:
        """:meth:`_batch` before its header stamp: the template's copy with the ids patched in
        and both timestamps set, CRC not computed (``build_batch``'s bytes without a
        template). What an idempotent producer is handed: it stamps every batch at its first
        send (producer id, epoch, sequence, then header and CRC), so stamping here too would
        be overwritten."""
        n = self.records_per_batch
        now = self.loop.clock.now_ms
        if self._template is None:
            values = [(b"%d:%d:%d|" % (pid, seq, r) + self._pad)[:max(self.record_bytes, 24)]
                      for r in range(n)]
            keys = None
            if self.n_keys > 0:
                keys = [b"key-%08d" % ((seq * n + r) % self.n_keys) for r in range(n)]
            return build_batch(values, keys=keys, now_ms=now)
        # each value already ends its id with ``rrrr|``
        ids = b"%08d:%09d:" % (pid % 10**8, seq % 10**9)
        if self.n_keys > 0:
            buf = bytearray(self._template)
            for pos in self._value_pos:
                buf[pos:pos + 19] = ids
            for r, pos in enumerate(self._key_pos):
                buf[pos + 4:pos + 12] = b"%08d" % ((seq * n + r) % self.n_keys)
        else:  # the template's pieces around the ids, joined in one step
            buf = bytearray(ids).join(self._pieces)  # a bytearray: one copy
        _BASE_TS.pack_into(buf, 27, now)
        _BASE_TS.pack_into(buf, _MAX_TS_AT, now)
        return buf

    def _make_template(self) -> None:
        """The template batch (only when every value has room for the 24-byte id)."""
        self._template = None
        n = self.records_per_batch
        if self.record_bytes < 24:
            return
        values = [self._pad[: self.record_bytes]] * n
        keys = [b"key-%08d" % 0] * n if self.n_keys > 0 else None
        template = build_batch(values, keys=keys, now_ms=0)
        cols = _batch_kernels.decode_records(template, 61, len(template), n, 0, 0)
        self._value_pos = [int(v) for v in cols[:, 4]]
        self._key_pos = [int(v) for v in cols[:, 2]]
        self._attributes = int.from_bytes(template[21:23], "big")
        buf = bytearray(template)
        for r, pos in enumerate(self._value_pos):  # the record number part of each id
            buf[pos + 19:pos + 24] = b"%04d|" % (r % 10**4)
        self._template = bytes(buf)
        # the template cut at every value's 19-byte id: ``ids.join(pieces)`` patches them all
        cuts = [0, *(p for pos in self._value_pos for p in (pos, pos + 19)), len(buf)]
        self._pieces = [self._template[a:b] for a, b in zip(cuts[::2], cuts[1::2], strict=True)]

    def audit_logs(self, scans: Mapping[tuple[int, TopicPartition], LogScan] | None = None,
                   digests: ScanDigests | None = None) -> dict[str, int | None]:
        """What a consumer reading every partition from its start would see of this workload's
        batches, on the current leaders: batches written twice (a retried request whose first
        attempt was appended but never acknowledged — the producer is not idempotent) and
        batches out of the order they were produced in (a retry landing after a later batch).
        Each batch's records are unique, so equal record digests mean one batch twice; the
        produce sequence number is read from the first record's value (``None`` when values
        are too short to carry it).

        ``*_batches`` and ``duplicate_records`` count the whole log (up to the log end);
        ``duplicated_records`` and ``reordered_records`` are what a consumer reading each
        partition's whole committed log (below the high watermark) gets: every record of a
        batch it already read, and every record of a batch produced before one it already
        read.

        ``scans``: :func:`~replica_core.sim.invariants.scan_log` results by (broker,
        partition) of logs that have not changed since (the scans of a full check just made,
        :meth:`~replica_core.sim.cluster.Cluster.check_invariants`): a leader's log found
        there is read from its scan rather than scanned again; ``digests``: the records
        digests that check computed of those scans' batches (by (broker, partition), then scan
        row), each taken from there rather than computed again."""
        cluster = self.cluster
        seq_at = self._value_pos[0] + 9 if self._template is not None else None
        dup_batches = dup_records = reordered = 0
        consumer_dups = consumer_reordered = 0
        for tp in self.tps:
            leader_id = cluster.leader_and_isr(tp)[0]
            leader = cluster.brokers.get(leader_id)
            if leader is None or not leader.alive or leader.rm is None:
                continue
            log = leader.rm.local_log(tp)
            if log is None:
                continue
            scan = scans.get((leader_id, tp)) if scans is not None else None
            headers, files, starts = scan if scan is not None else scan_log(log)
            if not len(headers):
                continue
            known = (digests.get((leader_id, tp)) if digests is not None and scan is not None
                     else None) or {}
            committed_end = int(log.high_watermark)
            seen: set[int] = set()
            highest = -1
            file_index = 0
            for k, row in enumerate(headers.tolist()):  # (Python ints: read once, each cell)
                while file_index + 1 < len(starts) and starts[file_index + 1] <= k:
                    file_index += 1
                pos = row[_COL_POSITION]
                size = row[_COL_SIZE]
                count = row[_COL_RECORD_COUNT]
                committed = row[_COL_BASE_OFFSET] + row[_COL_LAST_OFFSET_DELTA] < committed_end
                f = files[file_index]
                digest = known.get(k)
                if digest is None:
                    view = f.view(pos, size)
                    try:
                        digest = records_digest(view)
                    finally:
                        view.release()
                # (the 9 bytes alone: no view of the batch when its digest is known)
                seq = int(f.read(pos + seq_at, 9)) if seq_at is not None and \
                    size >= seq_at + 9 else -1
                if digest in seen:
                    dup_batches += 1
                    dup_records += count
                    if committed:
                        consumer_dups += count
                    continue
                seen.add(digest)
                if seq >= 0:
                    if seq < highest:
                        reordered += 1
                        if committed:
                            consumer_reordered += count
                    highest = max(highest, seq)
        return {"duplicate_batches": dup_batches, "duplicate_records": dup_records,
                "reordered_batches": reordered if seq_at is not None else None,
                "duplicated_records": consumer_dups,
                "reordered_records": consumer_reordered if seq_at is not None else None}

    def stats(self) -> dict[str, Any]:
        p = self.producer
        out = {
            "produced_batches": p.sent_batches,
            "produced_records": p.sent_batches * self.records_per_batch,
            "acked_batches": p.acked_batches,
            "failed_batches": p.failed_batches,
            "failed_records": p.failed_records,
            "producer_retries": p.retries,
            "producer_errors": dict(sorted(p.errors.items())),
            "producer_epoch_bumps": p.epoch_bumps,
        }
        if self.consumer is not None:
            out.update(self.consumer.stats())
        return out


class Consumer:
    """Reads committed data (up to the HW) from every partition's leader every ``poll_ms``,
    one fetch per leader, and counts the records it consumed and batches failing their CRC."""

    def __init__(self, cluster: Cluster, client_id: int, tps: Sequence[TopicPartition], *,
                 poll_ms: int = 1000) -> None:
        self.cluster = cluster
        self.loop = cluster.loop
        self.client_id = client_id
        self.tps = list(tps)
        self.poll_ms = poll_ms
        self.positions = dict.fromkeys(self.tps, 0)
        self.consumed_records = 0
        self.corrupt_batches = 0
        self.fetches = 0
        self._until = 0
        self._in_flight: set[int] = set()
        cluster.client_ids.append(client_id)

    def start(self, until_ms: int) -> None:
        self._until = until_ms
        self.loop.call_later(self.poll_ms, self._poll)

    def _poll(self) -> None:
        if self.loop.now >= self._until:
            return
        by_leader: dict[int, list[FetchPartition]] = {}
        for tp in self.tps:
            leader = self.cluster.leader_and_isr(tp)[0]
            if leader >= 0:
                by_leader.setdefault(leader, []).append(
                    FetchPartition(tp, self.positions[tp], 1 << 20))
        for leader, parts in sorted(by_leader.items()):
            if leader in self._in_flight:
                continue
            self._in_flight.add(leader)
            req = FetchRequest(-1, 0, 1, 50 << 20, tuple(parts),
                               isolation_level=ISOLATION_READ_UNCOMMITTED)
            self.fetches += 1
            self.cluster.network.request(
                self.client_id, leader, ConsumerFetch(req), 64 + 24 * len(parts),
                lambda answer, b=leader: self._on_answer(b, answer), timeout_ms=30_000)
        self.loop.call_later(self.poll_ms, self._poll)

    def _on_answer(self, leader: int, answer: Any) -> None:
        self._in_flight.discard(leader)
        if is_failure(answer) or answer is None:
            return
        from replica_core.records import scan

        for pd in answer.partitions:
            if pd.error_code != Errors.NONE or not len(pd.records):
                continue
            headers = scan(pd.records, check_crc=True).headers
            if not len(headers):
                continue
            self.corrupt_batches += int((headers[:, 14] != 1).sum())
            last = int(headers[-1, 2] + headers[-1, 3])
            start = self.positions.get(pd.tp, 0)
            self.consumed_records += max(0, last + 1 - start)
            self.positions[pd.tp] = last + 1

    def stats(self) -> dict[str, Any]:
        return {"consumed_records": self.consumed_records, "consumer_fetches": self.fetches,
                "consumed_corrupt_batches": self.corrupt_batches}


__all__ = ["Consumer", "Producer", "Workload"]
