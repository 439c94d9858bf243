"""``DkgConsumer``: a ``confluent_kafka.Consumer`` that keeps each key's order across DKG epoch switches.

At an epoch switch DKG moves a few keys to other partitions, often owned by other group members. A
plain consumer can then process a moved key's new records (on its new partition) before its old
partition's backlog of that key. ``DkgConsumer`` holds such records until the key's old partitions
are drained, as the Rust ``DkgConsumer`` does: the rules (``docs/spec.md`` 9.3, C1-C19) are the Rust
core's (``dkg_kafka._native.ConsumerCore``, ``python/rust/consumer.rs``), not a copy. This module
does only the I/O around it, mirroring ``partitioner/src/kafka/consumer/``: poll confluent-kafka,
follow the control topic (through a :class:`~dkg_kafka.router.Router`) and the handoff topic
(leases, markers, history, other members' progress), commit with the metadata the core gives,
announce progress, call the hooks, pause and resume partitions as the core asks.

Only the ordering producers' records are ordered across switches (Rust ``DkgProducer`` or Java
``DkgKafkaProducer`` with ordering on, ``dkg-lab loadgen --ordering``): the protocol needs their
leases and markers. ``DkgProducer`` (Python) writes neither.
"""

from __future__ import annotations

import collections
import itertools
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, overload

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from ._native import Assignment, CommitSnapshot, ConsumerCore, EpochChange, SplitChange
from ._config import connection_config, control_consumer_config
from .metrics import ConsumerMetricsState
from .router import DEFAULT_CONTROL_TOPIC, Router

DEFAULT_HANDOFF_TOPIC = "_dkg.handoff"
"""The handoff topic of producers' leases and markers, history and consumers' progress."""

_log = logging.getLogger("dkg_kafka")

# Housekeeping period (lease expiry, flow control, gauges, periodic commits), as in Rust.
_HOUSEKEEPING = 0.1
# The member owning partition 0 tombstones long-expired leases this often.
_GC_EVERY = 60.0
# A partition warns of commits that leave out their skip window at most this often (seconds).
WINDOW_WARN_EVERY = 60.0
# Room for the largest assignment document on the handoff topic (its history records).
_HANDOFF_MAX_BYTES = 9 * 1024 * 1024
# Keys only the classic group protocol takes (librdkafka refuses them under KIP-848).
_JSON = json.JSONDecoder()


def committed_metadata(tp: TopicPartition) -> str | None:
    """The commit metadata of ``tp`` (from ``Consumer.committed``) as it was committed, or None.

    confluent-kafka reads librdkafka's metadata as a NUL-terminated C string, but
    ``rd_kafka_committed`` copies it into the caller's list without a terminator
    (``rd_kafka_topic_partition_list_update`` copies ``metadata_size`` bytes): metadata committed
    without a trailing NUL (by the Java and Rust consumers; confluent-kafka's own commits include
    one) comes back followed by whatever bytes lie after it in memory, which may not even decode
    (``UnicodeDecodeError``, seen in a group of Rust, Java and Python members). The protocol's
    metadata is one JSON object (spec C7), so what follows its end is dropped; other metadata is
    passed on as read (the core then ignores it, with a warning).
    """
    try:
        raw: str | None = tp.metadata
    except UnicodeDecodeError as e:
        raw = e.object.decode("utf-8", errors="replace")
    if not raw:
        return None
    if raw.startswith("{"):
        try:
            _, end = _JSON.raw_decode(raw)
        except ValueError:
            return raw
        return raw[:end]
    return raw


_CLASSIC_ONLY = ("partition.assignment.strategy", "session.timeout.ms", "heartbeat.interval.ms")
_SEQ = itertools.count()

OnEpoch = Callable[[EpochChange], object]
OnPartitions = Callable[[list[int]], object]
OnSplitChange = Callable[[SplitChange], object]


def uses_consumer_group_protocol(conf: Mapping[str, Any]) -> bool:
    """Whether ``conf`` joins its group with KIP-848's protocol (``group.protocol=consumer``).
    librdkafka's default (``classic`` in the librdkafka confluent-kafka bundles) otherwise."""
    return str(conf.get("group.protocol", "classic")).strip().lower() == "consumer"


def consumer_config(conf: Mapping[str, Any]) -> dict[str, Any]:
    """The user's configuration plus what the protocol needs (the Rust builder's
    ``client_config``): no automatic commits or offset stores, and under the classic protocol
    ``partition.assignment.strategy=cooperative-sticky`` (a user's other strategy is overridden
    with a warning). Under KIP-848 nothing of the group's is set: the broker assigns,
    incrementally, which is what the cooperative protocol gives."""
    if not conf.get("group.id"):
        raise ValueError("DkgConsumer needs group.id")
    out = dict(conf)
    out["enable.auto.commit"] = False
    out["enable.auto.offset.store"] = False
    if not uses_consumer_group_protocol(out):
        strategy = out.get("partition.assignment.strategy")
        if strategy not in (None, "cooperative-sticky"):
            _log.warning(
                "DkgConsumer uses partition.assignment.strategy=cooperative-sticky (overriding %r)",
                strategy,
            )
        out["partition.assignment.strategy"] = "cooperative-sticky"
    return out


class DkgConsumer:
    """Drop-in for ``confluent_kafka.Consumer`` of one DKG topic: ``poll`` returns only the
    records the ordering protocol lets out, each key's records in their producer's order.

    Args:
        conf: the ``confluent_kafka.Consumer`` configuration (``group.id`` required). The wrapper
            sets ``enable.auto.commit=false`` and ``enable.auto.offset.store=false`` (it commits
            itself: do not commit through other means) and, unless ``group.protocol=consumer``,
            ``partition.assignment.strategy=cooperative-sticky``.
        on_epoch: ``on_epoch(change)`` when a partition of this member drained an epoch
            (:class:`~dkg_kafka._native.EpochChange`: ``moved_out(key)`` names the keys whose
            state to flush and drop now); runs before the progress commit that lets their new
            owner go on.
        on_assign: ``on_assign(partitions)`` after their committed progress was loaded, before
            any of their records is handed out.
        on_revoke: ``on_revoke(partitions)`` before their final commit (rebalance or
            :meth:`close`); also when the assignment was lost (then nothing is committed).
        on_split_change: ``on_split_change(change)`` when a key became split or whole again
            (:class:`~dkg_kafka._native.SplitChange`).
        control_topic: the control topic (default ``_dkg.assignments``).
        handoff_topic: the handoff topic (default ``_dkg.handoff``), the producers' one.
        registry: a ``prometheus_client.CollectorRegistry`` for the ``dkg_consumer_*`` metrics
            (the Rust consumer's names and meanings); ``None`` registers nothing.
        member: this member's name, the ``member`` label (default ``client.id`` or
            ``dkg-consumer-<pid>-<n>``).
        max_held_records: held records per partition above which it is paused.
        stall_timeout: seconds a paused partition may release nothing before it is resumed
            anyway (spec 9.3, C13).
        commit_interval: seconds between periodic (asynchronous) commits; ``None``: only on
            :meth:`commit`, drained changes, revocation and :meth:`close`.
        startup_timeout: seconds to read the control and handoff topics to their ends.
        ensure_handoff_topic: create the handoff topic if it is missing.
        max_metadata_bytes: the broker's ``offset.metadata.max.bytes``.
        history_epochs: epochs of assignment history kept.
        unknown_epoch_wait: seconds a record stamped with an unknown epoch is held (C19).
        max_lease: the longest producer lease honoured, seconds (C2).

    Hooks run on the thread that calls :meth:`poll`, :meth:`consume`, :meth:`commit` or
    :meth:`close`, between two records. A record counts as processed when the application asks
    for the next one (``poll``/``consume``), commits or closes: commits cover only processed
    records, so a crash loses nothing and repeats only what was processed after the last commit.
    """

    def __init__(
        self,
        conf: Mapping[str, Any],
        *,
        on_epoch: OnEpoch | None = None,
        on_assign: OnPartitions | None = None,
        on_revoke: OnPartitions | None = None,
        on_split_change: OnSplitChange | None = None,
        control_topic: str = DEFAULT_CONTROL_TOPIC,
        handoff_topic: str = DEFAULT_HANDOFF_TOPIC,
        registry: Any = None,
        member: str | None = None,
        max_held_records: int = 10_000,
        stall_timeout: float = 5.0,
        commit_interval: float | None = 5.0,
        startup_timeout: float = 30.0,
        ensure_handoff_topic: bool = True,
        max_metadata_bytes: int = 4096,
        history_epochs: int = 32,
        unknown_epoch_wait: float = 10.0,
        max_lease: float = 120.0,
    ) -> None:
        self._conf = consumer_config(conf)
        self._user_conf = dict(conf)
        self.group: str = str(self._conf["group.id"])
        self.member: str = member or str(
            conf.get("client.id") or f"dkg-consumer-{os.getpid()}-{next(_SEQ)}"
        )
        self._hooks = (on_epoch, on_assign, on_revoke, on_split_change)
        self.control_topic = control_topic
        self.handoff_topic = handoff_topic
        self._registry = registry
        self._core_args: dict[str, Any] = {
            "max_held": max_held_records,
            "stall_timeout": stall_timeout,
            "max_metadata_bytes": max_metadata_bytes,
            "history": history_epochs,
            "unknown_epoch_wait": unknown_epoch_wait,
            "max_lease": max_lease,
        }
        self._commit_interval = commit_interval
        self._startup_timeout = startup_timeout
        self._ensure_handoff = ensure_handoff_topic
        self._consumer = Consumer(self._conf)
        self._core: ConsumerCore | None = None
        # The data topic ("" before subscribe).
        self.topic: str = ""
        self._router: Router | None = None
        self._writer: Producer | None = None
        self._handoff_reader: Consumer | None = None
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        # Filled by the control and handoff threads, drained by the polling thread (the core is
        # only ever driven from there, as the Rust consumer's loop owns its events).
        self._events: collections.deque[tuple[bytes | None, bytes | None] | Assignment] = (
            collections.deque()
        )
        self._next_housekeeping = 0.0
        self._next_commit = float("inf")
        self._next_gc = 0.0
        self._progress_retry_at = 0.0
        # When (time.monotonic) each partition last warned of a commit that left out its window.
        self._window_warned: dict[int, float] = {}
        self._closed = False
        # Gone without close (``_abandon``): revocations commit nothing and run no hook.
        self._abandoned = False
        self._final_commit_error: str | None = None
        # What close()'s own commit committed (partition -> offset and metadata), if it succeeded.
        self._committed_at_close: dict[int, tuple[int, str | None]] = {}
        # Metrics state, replaced whole at housekeeping (read by the collector's thread).
        self.metrics = ConsumerMetricsState()

    # -- lifecycle ---------------------------------------------------------------------------

    def subscribe(self, topics: Sequence[str]) -> None:
        """Join the group for one data topic (exactly one: the protocol's state is per topic).
        First reads the control and handoff topics to their ends (``TimeoutError`` after
        ``startup_timeout``), then subscribes and follows both in daemon threads."""
        if len(topics) != 1:
            raise ValueError(f"DkgConsumer consumes exactly one topic, not {list(topics)!r}")
        if self._core is not None or self._closed:
            raise RuntimeError("DkgConsumer.subscribe is called once, before close")
        (topic,) = topics
        deadline = time.monotonic() + self._startup_timeout
        md = self._consumer.list_topics(topic, timeout=max(0.1, deadline - time.monotonic()))
        tm = md.topics.get(topic)
        if tm is None or tm.error is not None or not tm.partitions:
            raise ValueError(f"topic {topic!r} does not exist ({tm.error if tm else 'no metadata'})")
        self.topic = topic
        core = ConsumerCore(topic, self.group, len(tm.partitions), **self._core_args)
        self._core = core
        connection = connection_config(self._user_conf)
        if self._ensure_handoff:
            _ensure_handoff_topic(connection, self.handoff_topic, deadline)
        router = Router(
            self._user_conf,
            control_topic=self.control_topic,
            startup_timeout=max(0.1, deadline - time.monotonic()),
        )
        router.add_listener(self._on_control)
        router.start()
        self._router = router
        self._handoff_reader = self._catch_up_handoff(deadline)
        self._apply_events()
        writer_conf = dict(connection)
        writer_conf.update(
            {
                "client.id": f"{self._user_conf.get('client.id') or 'dkg'}-handoff",
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
            }
        )
        self._writer = Producer(writer_conf)
        if self._registry is not None:
            from .metrics import register_consumer

            register_consumer(self, self._registry)
        _log.info(
            "DKG consumer starting: topic %s, group %s, member %s, %d partitions, epoch %d",
            topic,
            self.group,
            self.member,
            core.partitions,
            core.max_epoch,
        )
        now = time.monotonic()
        if self._commit_interval is not None:
            self._next_commit = now + self._commit_interval
        self._next_gc = now + _GC_EVERY
        self._consumer.subscribe(
            [topic], on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost
        )
        thread = threading.Thread(
            target=self._follow_handoff, args=(self._handoff_reader,), name="dkg-handoff"
        )
        thread.daemon = True
        thread.start()
        self._threads.append(thread)

    def close(self) -> None:
        """Leave the group cleanly: the last record counts as processed, everything is
        committed, then the final revocation runs ``on_revoke`` and commits the final offsets
        and progress. Raises ``KafkaException`` if that final commit failed (the records since
        the previous commit are then delivered again to the next owners); not when it only
        repeated what close's own first commit had committed (members leaving together make the
        group rebalance, which fails the repeat)."""
        if self._closed:
            return
        self._closed = True
        core = self._core
        if core is not None:
            try:
                # As commit(asynchronous=False), keeping what was committed.
                core.processed()
                self._commit_progress()
                offsets = self._snapshots(core, core.owned())
                if offsets:
                    self._consumer.commit(offsets=offsets, asynchronous=False)
                self._committed_at_close = {
                    tp.partition: (tp.offset, tp.metadata) for tp in offsets
                }
            except KafkaException as e:
                # A rebalance in progress, typically: the revocation below commits again.
                _log.debug("commit before close failed: %s", e)
        # The final revocation (on_revoke) runs inside close, served by the client.
        self._close_client(flush=True)
        if self._final_commit_error is not None:
            raise KafkaException(f"final commit on close: {self._final_commit_error}")

    def _abandon(self) -> None:
        """Leave as a crashed member does (tests): no commit, no hook, no announcement; the
        client leaves the group so that the others take the partitions over from the last
        commits (a real crash waits for the session timeout instead)."""
        self._abandoned = self._closed = True
        self._close_client(flush=False)

    def _close_client(self, *, flush: bool) -> None:
        """Close the client, then stop the follower threads and close the router and the handoff
        reader; `flush` sends the announcements still buffered first (a crash does not)."""
        try:
            self._consumer.close()
        finally:
            self._stop.set()
            for thread in self._threads:
                thread.join(5)
            if flush and self._writer is not None:
                self._writer.flush(5)
            if self._router is not None:
                self._router.close()
            if self._handoff_reader is not None:
                self._handoff_reader.close()

    def __enter__(self) -> DkgConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- records -----------------------------------------------------------------------------

    def poll(self, timeout: float | None = None) -> Message | None:
        """The next record the protocol lets out (``None`` after ``timeout`` seconds; ``None``
        or negative: wait). The record returned before counts as processed from now on. Error
        events are returned as the client returns them (``msg.error()`` set)."""
        core = self._core
        if core is None:
            core = self._require_core()
        if self._events:
            self._apply_events()
        # The common step (a record, no clock read here): one native call.
        r = core.next(self._consumer, timeout, self._progress_retry_at == 0.0)
        if r is None or r.__class__ is int:
            return self._poll_on(core, r, timeout)
        return r  # type: ignore[no-any-return]

    def _poll_on(self, core: ConsumerCore, r: Any, timeout: float | None) -> Message | None:
        """``poll`` after a first step that returned no record (``r``: ``None`` or a code)."""
        if timeout is None or timeout < 0:
            deadline = 0.0
        else:
            deadline = time.monotonic() - core.step_elapsed + timeout
        while True:
            if r is None:
                if deadline and time.monotonic() >= deadline:
                    return None
            elif r.__class__ is not int:
                return r  # type: ignore[no-any-return]
            elif r == 1:
                self._commit_progress()
            elif r == 2:
                self._maintain(force=True)
            wait = max(0.0, deadline - time.monotonic()) if deadline else None
            if self._events:
                self._apply_events()
            r = core.next(self._consumer, wait, self._progress_retry_at == 0.0)

    def consume(self, num_messages: int = 1, timeout: float | None = None) -> list[Message]:
        """Up to ``num_messages`` records the protocol lets out, in order (like
        ``Consumer.consume``; waits up to ``timeout`` seconds for the first). The records
        returned before count as processed from now on; every record of the list counts as
        processed when the application next calls ``poll``, ``consume``, ``commit`` or
        ``close``: the batch is filled from one fetch, with no client call (no commit, no
        rebalance) once its first record is in it."""
        core = self._require_core()
        deadline = _deadline(timeout)
        num_messages = max(1, num_messages)
        fetched: list[Message] | None = None
        while True:
            if self._events or time.monotonic() >= self._next_housekeeping:
                self._maintain()
            # One native call per batch: the fetched list itself when all of it is of quiet
            # partitions, else what the protocol lets out of it (the rest waits in the core).
            out = core.released(fetched, num_messages, self._progress_retry_at == 0.0)
            fetched = None
            if out is None:
                self._commit_progress()
                continue
            if out:
                return out
            wait = _remaining(deadline)
            fetched = self._consumer.consume(num_messages, min(wait, _HOUSEKEEPING))
            if not fetched:
                fetched = None
                if wait <= 0:
                    return out

    # -- commits -----------------------------------------------------------------------------

    @overload
    def commit(self, *, asynchronous: Literal[True] = ...) -> None: ...

    @overload
    def commit(self, *, asynchronous: Literal[False]) -> list[TopicPartition]: ...

    def commit(self, *, asynchronous: bool = True) -> list[TopicPartition] | None:
        """Mark the last record processed and commit every owned partition (offset = lowest
        unprocessed, metadata = the protocol's passed map): a held record is never skipped.
        ``asynchronous=False`` waits and returns the committed offsets. No ``message`` or
        ``offsets``: only the protocol knows which offsets are safe."""
        core = self._require_core()
        core.processed()
        self._commit_progress()
        offsets = self._snapshots(core, core.owned())
        if not offsets:
            return None if asynchronous else []
        if asynchronous:
            self._consumer.commit(offsets=offsets, asynchronous=True)
            return None
        return self._consumer.commit(offsets=offsets, asynchronous=False)

    # -- state -------------------------------------------------------------------------------

    @property
    def core(self) -> ConsumerCore:
        """The protocol's state machine (for inspection: owned partitions, settled epoch...)."""
        return self._require_core()

    def assignment(self) -> list[TopicPartition]:
        """The client's current assignment (``Consumer.assignment``)."""
        return self._consumer.assignment()

    def held_records(self) -> int:
        """Records held right now (all owned partitions)."""
        return sum(n for _, n in self._require_core().held_counts())

    def settled_epoch(self) -> int:
        """The lowest epoch drained on every partition, as this member knows it."""
        return self._require_core().settled

    # -- internals: the polling thread -------------------------------------------------------

    def _require_core(self) -> ConsumerCore:
        if self._core is None:
            raise RuntimeError("DkgConsumer: call subscribe([topic]) first")
        return self._core

    def _on_control(self, assignment: Assignment) -> None:
        if assignment.topic == self.topic:
            self._events.append(assignment)

    def _apply_events(self) -> None:
        core = self._require_core()
        events = self._events
        while events:
            ev = events.popleft()
            if isinstance(ev, Assignment):
                _log.info("consumer saw a new assignment: topic %s, epoch %d", ev.topic, ev.epoch)
                core.on_assignment(ev)
                continue
            key, value = ev
            try:
                kind = core.on_handoff(key, value)
            except ValueError as e:
                _log.debug("skipped a handoff record: %s", e)
                continue
            if kind.startswith("marker_rejected"):
                _log.warning("skipped a marker record of the handoff topic (%s)", kind)
        on_split_change = self._hooks[3]
        for change in core.take_split_changes():
            _log.info("split change: %r", change)
            if on_split_change is not None:
                on_split_change(change)

    def _maintain(self, force: bool = False) -> None:
        """Events, and every 100 ms: lease expiry, flow control, gauges, periodic commits,
        garbage collection (the Rust driver's ``maintain``)."""
        self._apply_events()
        now = time.monotonic()
        if now < self._next_housekeeping and not force:
            return
        self._next_housekeeping = now + _HOUSEKEEPING
        core = self._require_core()
        core.defer_housekeeping(_HOUSEKEEPING)
        if self._progress_retry_at and now >= self._progress_retry_at:
            self._progress_retry_at = 0.0
        core.tick()
        pause, resume = core.flow()
        for partition, held in core.take_stalled():
            _log.warning(
                "partition %d of %s paused with nothing released for the stall timeout: resuming "
                "past the hold limit (%d held; marker ends may lie behind the pause)",
                partition,
                self.topic,
                held,
            )
        self._flow(pause, True)
        self._flow(resume, False)
        self.metrics.update(self._consumer, self.topic, core)
        if self._writer is not None:
            self._writer.poll(0)
        if now >= self._next_commit and self._commit_interval is not None:
            self._next_commit = now + self._commit_interval
            offsets = self._snapshots(core, core.owned())
            if offsets:
                try:
                    self._consumer.commit(offsets=offsets, asynchronous=True)
                except KafkaException as e:
                    _log.warning("periodic commit failed: %s", e)
        if now >= self._next_gc and core.owns(0):
            self._next_gc = now + _GC_EVERY
            self._collect_garbage(core)

    def _flow(self, partitions: list[int], pause: bool) -> None:
        if not partitions:
            return
        tps = [TopicPartition(self.topic, p) for p in partitions]
        try:
            if pause:
                self._consumer.pause(tps)
            else:
                self._consumer.resume(tps)
            _log.debug("flow control: %s %s", "pause" if pause else "resume", partitions)
        except KafkaException as e:
            _log.warning("pause/resume of %s failed: %s", partitions, e)

    def _warn_window_left_out(self, s: CommitSnapshot) -> None:
        """Warn that the commit of ``s`` leaves out its skip window (C7: its metadata did not
        fit), at most once per ``WINDOW_WARN_EVERY`` seconds and partition. The core counts it
        (``dkg_consumer_commit_windows_left_out_total``)."""
        unprocessed = s.window_left_out
        if unprocessed is None:
            return
        now = time.monotonic()
        last = self._window_warned.get(s.partition)
        if last is not None and now - last < WINDOW_WARN_EVERY:
            return
        self._window_warned[s.partition] = now
        _log.warning(
            "the commit of %s-%d at offset %d leaves out its skip window (%d unprocessed offsets "
            "over the %d-byte metadata limit): a next owner would re-process the records "
            "processed above %d; keep max_held_records below ~900",
            self.topic,
            s.partition,
            s.offset,
            unprocessed,
            self._core_args["max_metadata_bytes"],
            s.offset,
        )

    def _snapshots(self, core: ConsumerCore, partitions: Sequence[int]) -> list[TopicPartition]:
        """Offsets and metadata to commit for ``partitions`` (those with something fetched and
        metadata within the limit)."""
        out = []
        for p in partitions:
            s = core.snapshot(p)
            if isinstance(s, CommitSnapshot):
                self._warn_window_left_out(s)
                out.append(TopicPartition(self.topic, p, s.offset, metadata=s.metadata))
        return out

    def _commit_progress(self) -> None:
        """Drained changes: hooks, a synchronous commit with the metadata, then the
        announcement on the handoff topic (C7; the Rust glue's ``commit_progress``)."""
        core = self._require_core()
        snapshots: list[CommitSnapshot] = []
        changes: list[EpochChange] = []
        for p in core.progress_due():
            changes.extend(core.take_drained_epochs(p))
            s = core.snapshot(p)
            if s is None:
                # Nothing fetched: the change comes from leases only and claims no processing.
                record = core.mark_durable(p)
                if record is not None:
                    self._announce(record)
            elif isinstance(s, int):
                _log.error(
                    "commit metadata of partition %d over the limit (%d bytes): its progress "
                    "cannot be committed (too many producers?); moved keys waiting for it stay held",
                    p,
                    s,
                )
                self._progress_retry_at = time.monotonic() + 5.0
            else:
                self._warn_window_left_out(s)
                snapshots.append(s)
        on_epoch = self._hooks[0]
        if on_epoch is not None:
            for change in changes:
                on_epoch(change)
        if not snapshots:
            return
        offsets = [
            TopicPartition(self.topic, s.partition, s.offset, metadata=s.metadata) for s in snapshots
        ]
        try:
            self._consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as e:
            _log.warning("progress commit failed (retrying): %s", e)
            self._progress_retry_at = time.monotonic() + 0.2
            return
        for s in snapshots:
            record = core.committed(s)
            if record is not None:
                self._announce(record)

    def _announce(self, record: tuple[bytes, bytes]) -> None:
        if self._writer is None:
            return
        key, value = record
        try:
            self._writer.produce(self.handoff_topic, key=key, value=value)
            self._writer.poll(0)
        except (KafkaException, BufferError) as e:
            _log.warning("progress announcement not sent: %s", e)

    def _collect_garbage(self, core: ConsumerCore) -> None:
        """Tombstone leases expired long ago with their producer's marker, and history no member
        needs (``ConsumerCore.garbage``, spec 9.1)."""
        if self._writer is None:
            return
        for key in core.garbage():
            _log.debug("handoff garbage collection: %s", key)
            try:
                self._writer.produce(self.handoff_topic, key=key.encode(), value=None)
            except (KafkaException, BufferError) as e:
                _log.warning("handoff garbage collection of %s failed: %s", key, e)

    # -- rebalance callbacks (inside the client's poll, on the polling thread) ---------------

    def _partitions_of(self, partitions: list[TopicPartition]) -> list[int]:
        return sorted(tp.partition for tp in partitions if tp.topic == self.topic)

    def _on_assign(self, consumer: Consumer, tps: list[TopicPartition]) -> None:
        partitions = self._partitions_of(tps)
        if not partitions or self._closed or self._abandoned:
            return
        core = self._require_core()
        committed = self._committed(consumer, partitions)
        for p in partitions:
            offset, metadata = committed.get(p, (None, None))
            _log.debug("committed at assignment: partition %d, offset %s, metadata %s", p, offset, metadata)
            warning = core.assign(p, offset, metadata)
            if warning is not None:
                _log.warning(
                    "partition %d: ignoring commit metadata this build does not read: %s", p, warning
                )
        _log.info("partitions assigned: %s %s", self.topic, partitions)
        on_assign = self._hooks[1]
        if on_assign is not None:
            on_assign(partitions)
        for p in partitions:
            record = core.initial_progress(p)
            if record is not None:
                self._announce(record)

    def _committed(
        self, consumer: Consumer, partitions: list[int]
    ) -> dict[int, tuple[int | None, str | None]]:
        tps = [TopicPartition(self.topic, p) for p in partitions]
        for attempt in (1, 2):
            try:
                out: dict[int, tuple[int | None, str | None]] = {}
                for tp in consumer.committed(tps, timeout=5):
                    offset = tp.offset if tp.offset is not None and tp.offset >= 0 else None
                    out[tp.partition] = (offset, committed_metadata(tp))
                return out
            except KafkaException as e:
                _log.warning("reading committed offsets (attempt %d): %s", attempt, e)
                time.sleep(0.2)
        _log.error(
            "could not read the committed metadata of newly assigned partitions %s: they start "
            "without skip rules (records processed by their previous owner below its markers may "
            "be processed again)",
            partitions,
        )
        return {}

    def _on_revoke(self, consumer: Consumer, tps: list[TopicPartition]) -> None:
        self._revoked(consumer, tps, lost=False)

    def _on_lost(self, consumer: Consumer, tps: list[TopicPartition]) -> None:
        self._revoked(consumer, tps, lost=True)

    def _revoked(self, consumer: Consumer, tps: list[TopicPartition], *, lost: bool) -> None:
        partitions = self._partitions_of(tps)
        if not partitions:
            return
        core = self._require_core()
        if self._abandoned:
            # A crash: nothing is committed and no hook runs; the next owners resume from the
            # last commits.
            for p in partitions:
                core.revoke(p)
            return
        on_revoke = self._hooks[2]
        if on_revoke is not None:
            on_revoke(partitions)
        if not lost:
            snapshots = []
            for p in partitions:
                s = core.snapshot(p)
                if isinstance(s, CommitSnapshot):
                    self._warn_window_left_out(s)
                    snapshots.append(s)
                elif isinstance(s, int):
                    _log.error(
                        "commit metadata of partition %d too large (%d bytes): final offset not committed",
                        p,
                        s,
                    )
            if snapshots:
                offsets = [
                    TopicPartition(self.topic, s.partition, s.offset, metadata=s.metadata)
                    for s in snapshots
                ]
                try:
                    self._consumer.commit(offsets=offsets, asynchronous=False)
                    _log.debug(
                        "final commit of revoked partitions: %s",
                        [(tp.partition, tp.offset, tp.metadata) for tp in offsets],
                    )
                    self._final_commit_error = None
                    for s in snapshots:
                        record = core.committed(s)
                        if record is not None:
                            self._announce(record)
                except KafkaException as e:
                    if self._closed and all(
                        self._committed_at_close.get(tp.partition) == (tp.offset, tp.metadata)
                        for tp in offsets
                    ):
                        # Close's own commit already committed exactly these: nothing is
                        # delivered again.
                        _log.info(
                            "final commit of revoked partitions %s failed, but close had "
                            "committed the same offsets: %s",
                            partitions,
                            e,
                        )
                    else:
                        self._final_commit_error = str(e)
                        _log.warning(
                            "final commit of revoked partitions %s failed (their records since "
                            "the last commit will be delivered again): %s",
                            partitions,
                            e,
                        )
        for p in partitions:
            core.revoke(p)
        self.metrics.forget(partitions)
        _log.info("partitions revoked: %s %s (lost: %s)", self.topic, partitions, lost)

    # -- the handoff topic -------------------------------------------------------------------

    def _catch_up_handoff(self, deadline: float) -> Consumer:
        """Read the handoff topic to its end into the core (on this thread); returns the reader
        to follow it from there."""
        core = self._require_core()
        conf = control_consumer_config(self._user_conf)
        conf["group.id"] = f"{self.group}-dkg-handoff-reader"
        reader = Consumer(conf)
        md = reader.list_topics(self.handoff_topic, timeout=max(0.1, deadline - time.monotonic()))
        tm = md.topics.get(self.handoff_topic)
        if tm is None or tm.error is not None:
            reader.close()
            raise ValueError(f"handoff topic {self.handoff_topic!r}: {tm.error if tm else 'missing'}")
        partitions = sorted(tm.partitions)
        highs = {}
        for p in partitions:
            _, high = reader.get_watermark_offsets(
                TopicPartition(self.handoff_topic, p),
                timeout=max(0.1, deadline - time.monotonic()),
                cached=False,
            )
            highs[p] = high
        reader.assign([TopicPartition(self.handoff_topic, p, OFFSET_BEGINNING) for p in partitions])
        pending = {p for p, h in highs.items() if h > 0}
        read = 0
        while pending:
            if time.monotonic() > deadline:
                reader.close()
                raise TimeoutError(
                    f"reading handoff topic {self.handoff_topic!r} to its end: {read} records read"
                )
            for msg in reader.consume(10_000, 0.2):
                if msg.error() is not None:
                    continue
                read += 1
                try:
                    core.on_handoff(msg.key(), msg.value())
                except ValueError as e:
                    _log.debug("skipped a handoff record: %s", e)
                offset = msg.offset()
                if offset is not None and offset + 1 >= highs.get(msg.partition() or 0, 0):
                    pending.discard(msg.partition() or 0)
            # Positions move past transaction markers and compacted gaps too.
            for tp in reader.position([TopicPartition(self.handoff_topic, p) for p in pending]):
                if tp.offset >= highs[tp.partition]:
                    pending.discard(tp.partition)
        _log.debug("handoff topic read to its end: %d records", read)
        return reader

    def _follow_handoff(self, reader: Consumer) -> None:
        events = self._events
        while not self._stop.is_set():
            try:
                batch = reader.consume(1000, 0.1)
            except (KafkaException, RuntimeError) as e:
                if self._stop.is_set():
                    return
                _log.warning("handoff topic reader: %s", e)
                time.sleep(0.5)
                continue
            for msg in batch:
                if msg.error() is None:
                    events.append((msg.key(), msg.value()))


def _deadline(timeout: float | None) -> float:
    if timeout is None or timeout < 0:
        return float("inf")
    return time.monotonic() + timeout


def _remaining(deadline: float) -> float:
    if deadline == float("inf"):
        return 3600.0
    return max(0.0, deadline - time.monotonic())


def _ensure_handoff_topic(connection: Mapping[str, Any], name: str, deadline: float) -> None:
    """Create the handoff topic (compacted, one partition, room for the largest assignment
    document) if it does not exist, as the Rust builder does."""
    admin = AdminClient(dict(connection))
    timeout = max(0.1, deadline - time.monotonic())
    md = admin.list_topics(name, timeout=timeout)
    tm = md.topics.get(name)
    if tm is not None and tm.error is None and tm.partitions:
        return
    config = {"cleanup.policy": "compact", "max.message.bytes": str(_HANDOFF_MAX_BYTES)}
    futures = admin.create_topics([NewTopic(name, num_partitions=1, config=config)])
    try:
        futures[name].result(timeout=timeout)
    except KafkaException as e:
        err = e.args[0] if e.args else None
        if not (isinstance(err, KafkaError) and err.code() == KafkaError.TOPIC_ALREADY_EXISTS):
            raise
    while time.monotonic() < deadline:
        tm = admin.list_topics(name, timeout=timeout).topics.get(name)
        if tm is not None and tm.error is None and tm.partitions:
            return
        time.sleep(0.1)
