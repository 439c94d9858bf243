"""The router: follows the control topic and places keyed records.

A confluent-kafka ``Consumer`` in a daemon thread reads the control topic (one compacted partition,
key = data topic, value = assignment document, tombstone = retraction; ``docs/spec.md``): at start
from the beginning to the end, within a timeout, then live. Every record goes through the Rust
``AssignmentBook`` (epoch floor, topic match, tombstones, reject reasons: the same code as the Rust
producer's), never through a Python copy of those rules. A second daemon thread keeps the partition
counts of the topics in use fresh from metadata (``list_topics`` per topic, on a timer and at once for a
topic seen for the first time, each call bounded by a timeout). ``DkgProducer`` asks its own producer
client (spec section 7.2: the client must know a partition before it accepts it explicitly); a
standalone router uses an ``AdminClient`` of its own. A failed refresh keeps the last count; a topic
that disappears has no count until it is back.

Per topic the router holds one immutable :class:`~dkg_kafka._native.Placement` (partition count,
assignment, counters) and swaps it whole, so a ``produce()`` on another thread sees one consistent
pair. The lookup itself is Rust: it never raises for ``bytes`` keys and never blocks. Without an
assignment, after a tombstone, or while the document's partition count differs from the topic's, keys
go to Kafka's default murmur2 placement (what the Java producer does), never to librdkafka's CRC32
default.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from ._native import Assignment, AssignmentBook, ControlUpdate, Placement, PlacementTable, REJECT_REASONS, RouteCounters
from ._config import connection_config, control_consumer_config

DEFAULT_CONTROL_TOPIC = "_dkg.assignments"

_log = logging.getLogger("dkg_kafka")


ListTopics = Callable[..., Any]
"""``list_topics(topic, timeout=seconds) -> ClusterMetadata``, as confluent-kafka's clients have it."""


@dataclass(frozen=True)
class TopicStatus:
    """A topic's routing state, as the metrics report it."""

    topic: str
    epoch: int
    created_at_ms: int | None
    in_effect: bool


OTHER_TOPIC = "(other)"
"""The ``topic`` label of rejected control records that name no topic this router produced to
(another producer's topic, or none): not a legal topic name, so it never collides with one."""


class Router:
    """Places keyed records by the current DKG assignment of their topic.

    Args:
        conf: the producer's configuration; only its connection settings (bootstrap, security,
            sockets, ``client.id``) reach the control topic's consumer.
        control_topic: the control topic (default ``_dkg.assignments``).
        startup_timeout: seconds to read the control topic to its end in :meth:`start`.
        metadata_refresh_interval: seconds between partition count refreshes (minimum 0.1).
        metadata_timeout: bound of one metadata request, seconds.
        list_topics: the metadata source, called as ``list_topics(topic, timeout=seconds)``
            (``Producer.list_topics``); default an ``AdminClient`` on ``conf``'s connection.
        epoch_header: which records :meth:`route` gives a ``dkg-epoch`` header value (spec
            section 8, the Rust producer's ``EpochHeader``): ``"auto"`` (default: none, as for
            every producer outside the ordering protocol, which this package does not take part
            in; a consumer uses a record's epoch only with its producer's markers), ``"moved"``
            (records of keys whose partition changed in the topic's latest epoch transition),
            ``"all"`` (every record the assignment placed) or ``"off"``.
    """

    def __init__(
        self,
        conf: Mapping[str, Any],
        *,
        control_topic: str = DEFAULT_CONTROL_TOPIC,
        startup_timeout: float = 30.0,
        metadata_refresh_interval: float = 5.0,
        metadata_timeout: float = 5.0,
        list_topics: ListTopics | None = None,
        epoch_header: str = "auto",
    ) -> None:
        if epoch_header not in ("auto", "moved", "all", "off"):
            raise ValueError(
                f'epoch_header must be "auto", "moved", "all" or "off", not {epoch_header!r}'
            )
        # "auto" is the Rust producer's rule for a producer without ordering: no header.
        self._epoch_header = "off" if epoch_header == "auto" else epoch_header
        self.control_topic = control_topic
        self._consumer_conf = control_consumer_config(conf)
        self._metadata_conf = connection_config(conf)
        self._startup_timeout = startup_timeout
        self._refresh = max(0.1, metadata_refresh_interval)
        self._metadata_timeout = metadata_timeout
        self._list_topics = list_topics
        self._book = AssignmentBook()
        # Read without a lock on the produce path (a cached lookup, python/rust/table.rs); written
        # under `_lock` by the two background threads.
        self._placements = PlacementTable()
        self._counters: dict[str, RouteCounters] = {}
        self._counts: dict[str, int] = {}
        self._wanted: set[str] = set()
        # (topic label, reason) -> count: the record's topic if this router produced to it, else
        # OTHER_TOPIC, so the labels stay bounded by the producer's own topics.
        self._rejected: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._wake = threading.Event()
        self._closed = threading.Event()
        self._consumer: Consumer | None = None
        self._threads: list[threading.Thread] = []
        # Per topic: its current assignment and where keys lived before it (previous
        # assignment, whether that is known: not for the first one read at start-up).
        self._current: dict[str, Assignment] = {}
        self._before: dict[str, tuple[Assignment | None, bool]] = {}
        self._live = False
        # Records rejected while reading the control topic at start-up, per record key: reason ->
        # count. Logged as one line per topic once read (not one line per old record).
        self._startup_rejects: dict[str | None, dict[str, int]] = {}
        # Per topic: (epoch, time.monotonic() of its adoption), the latest only.
        self._adopted_at: dict[str, tuple[int, float]] = {}
        # Called with every adopted assignment, in log order (``DkgConsumer`` follows the control
        # topic through its router).
        self._listeners: list[Callable[[Assignment], None]] = []

    # -- lifecycle ---------------------------------------------------------------------------

    def add_listener(self, listener: Callable[[Assignment], None]) -> None:
        """Call ``listener(assignment)`` for every assignment the router adopts from now on, in
        control-topic order: at :meth:`start` (every record read to the end, on the calling
        thread) and live (on the control topic's thread: keep it short, hand it over)."""
        self._listeners.append(listener)

    def start(self) -> Router:
        """Read the control topic to its end (``TimeoutError`` after ``startup_timeout``), fetch
        the partition counts of the assigned topics, then follow both in daemon threads."""
        if self._consumer is not None or self._closed.is_set():
            raise RuntimeError("a Router starts once (create a new one after close())")
        consumer = Consumer(self._consumer_conf)
        # Not the consumer's list_topics(): it hangs while another thread polls the consumer.
        if self._list_topics is None:
            self._list_topics = AdminClient(self._metadata_conf).list_topics
        metadata = self._list_topics
        self._consumer = consumer
        try:
            consumer.assign([TopicPartition(self.control_topic, 0, OFFSET_BEGINNING)])
            self._read_to_end(consumer, time.monotonic() + self._startup_timeout)
            self._live = True
            self._log_startup_rejects()
            self._refresh_counts(metadata, self._wanted_topics())
        except BaseException:
            self._consumer = None
            consumer.close()
            raise
        threads = (
            threading.Thread(target=self._follow, args=(consumer,), name="dkg-control"),
            threading.Thread(target=self._follow_metadata, args=(metadata,), name="dkg-metadata"),
        )
        for thread in threads:
            thread.daemon = True
            thread.start()
            self._threads.append(thread)
        return self

    def close(self, timeout: float = 10.0) -> None:
        """Stop following and close the consumer (idempotent)."""
        self._closed.set()
        self._wake.set()
        for thread in self._threads:
            thread.join(timeout)
        self._threads.clear()
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            consumer.close()

    def __enter__(self) -> Router:
        return self.start() if self._consumer is None else self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the produce path --------------------------------------------------------------------

    def partition(self, topic: str, key: bytes) -> int | None:
        """The partition of a keyed record, counted in the metrics; ``None`` while the topic's
        partition count is unknown (the client then places it with ``murmur2_random``, Kafka's
        placement too). Never raises for ``bytes`` keys, never blocks."""
        placement = self._placements.get(topic)
        if placement is not None:
            return placement.place(key)
        self._unplaced(topic)
        return None

    def route(self, topic: str, key: bytes) -> tuple[int | None, bytes | None]:
        """Like :meth:`partition`, with the record's ``dkg-epoch`` header value (``None``: no
        header) as ``epoch_header`` says."""
        placement = self._placements.get(topic)
        if placement is not None:
            return placement.place_stamped(key)
        self._unplaced(topic)
        return _UNPLACED

    def placement(self, topic: str) -> Placement | None:
        """The topic's current placement (``None`` while its partition count is unknown)."""
        return self._placements.get(topic)

    def _unplaced(self, topic: str) -> None:
        counters = self._counters.get(topic)
        if counters is None or topic not in self._wanted:
            with self._lock:
                counters = self._counters_of(topic)
                if topic not in self._wanted:
                    self._wanted.add(topic)
                    self._wake.set()
        counters.count_unplaced()

    # -- state, under `_lock` ----------------------------------------------------------------

    def _counters_of(self, topic: str) -> RouteCounters:
        counters = self._counters.get(topic)
        if counters is None:
            counters = self._counters[topic] = RouteCounters()
        return counters

    def _replace(self, topic: str) -> None:
        """Rebuild the topic's placement from its partition count and current assignment."""
        count = self._counts.get(topic)
        if count is None:
            return
        previous, previous_known = self._before.get(topic, (None, False))
        placement = Placement(
            count,
            self._current.get(topic),
            self._counters_of(topic),
            previous=previous,
            previous_known=previous_known,
            epoch_header=self._epoch_header,
        )
        self._placements[topic] = placement
        self._changed.notify_all()

    def _wanted_topics(self) -> list[str]:
        with self._lock:
            return sorted(self._wanted | set(self._book.topics()))

    # -- the control topic -------------------------------------------------------------------

    def _apply(self, key: bytes | None, value: bytes | None) -> ControlUpdate:
        # Only this thread (or a test) applies records. Decoding (up to 8 MiB) runs outside
        # `_lock` and without the GIL, so a produce() that needs the lock (a topic's first record)
        # never waits for it; `_replace` reads the book's latest state under the lock.
        update = self._book.apply(key, value)
        with self._lock:
            if update.outcome == "rejected":
                reason = update.reason or "invalid"
                label = update.topic if update.topic in self._counters else OTHER_TOPIC
                self._rejected[label, reason] = self._rejected.get((label, reason), 0) + 1
                self._changed.notify_all()
            elif update.outcome in ("reset", "reread"):
                # The book dropped every topic (a recreated control topic, spec 6.4); on
                # "reread" the caller seeks back to the beginning (`_handle`).
                for topic in list(self._current):
                    self._current.pop(topic, None)
                    self._before.pop(topic, None)
                    self._replace(topic)
                self._changed.notify_all()
            elif update.outcome in ("accepted", "retracted") and update.topic is not None:
                topic = update.topic
                previous = self._current.pop(topic, None)
                self._before.pop(topic, None)
                if update.assignment is not None:
                    self._current[topic] = update.assignment
                    # Read live, routing was Kafka's placement until now; at start-up nothing
                    # was routed yet, so without a predecessor nothing counts as moved.
                    self._before[topic] = (previous, previous is not None or self._live)
                    self._adopted_at[topic] = (update.assignment.epoch, time.monotonic())
                if update.topic not in self._wanted:
                    self._wanted.add(update.topic)
                    self._wake.set()
                self._replace(update.topic)
                self._changed.notify_all()
        if update.outcome == "accepted" and update.assignment is not None:
            for listener in self._listeners:
                listener(update.assignment)
        if update.outcome == "rejected":
            if not self._live:
                reasons = self._startup_rejects.setdefault(update.topic, {})
                reason = update.reason or "invalid"
                reasons[reason] = reasons.get(reason, 0) + 1
                return update
            _log.warning(
                "rejected a control-topic record for topic %r (%s): %s; the last good "
                "assignment stays",
                update.topic,
                update.reason,
                update.detail,
            )
        return update

    def _log_startup_rejects(self) -> None:
        for topic, reasons in sorted(self._startup_rejects.items(), key=lambda t: str(t[0])):
            _log.warning(
                "%d control-topic records for topic %r rejected when reading the control topic "
                "at start (%s); the last good assignment stays",
                sum(reasons.values()),
                topic,
                ", ".join(f"{r}: {n}" for r, n in sorted(reasons.items())),
            )
        self._startup_rejects.clear()

    def _read_to_end(self, consumer: Consumer, deadline: float) -> int:
        tp = TopicPartition(self.control_topic, 0)
        try:
            low, high = consumer.get_watermark_offsets(
                tp, timeout=max(0.1, deadline - time.monotonic()), cached=False
            )
        except KafkaException as e:
            if _is_unknown_topic(e):
                _log.warning(
                    "control topic %r does not exist yet: no assignments; following it until it does",
                    self.control_topic,
                )
                return 0
            raise
        if high <= low:
            return 0
        read = 0
        while not self._at(consumer, high):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(
                    f"reading control topic {self.control_topic!r} to its end: offset {high} "
                    f"not reached in {self._startup_timeout} s; read {read}"
                )
            msg = consumer.poll(min(0.2, remaining))
            if msg is None:
                continue
            if msg.error() is not None:
                _log.debug("control topic consumer: %s", msg.error())
                continue
            read += 1
            if self._handle(consumer, msg.key(), msg.value()):
                continue  # back at the beginning: read to `high` again
            if (msg.offset() or 0) + 1 >= high:
                break
        return read

    def _handle(self, consumer: Consumer, key: bytes | None, value: bytes | None) -> bool:
        """Apply one record; after one that asks for a re-read (a document of a generation not in
        force, spec 6.4) assign the control partition again at its beginning, as the Rust and
        Java readers do, so the records that follow are the topic's from its first on. Returns
        whether it rewound."""
        if self._apply(key, value).outcome != "reread":
            return False
        _log.warning(
            "control topic %r: a document of another generation; reading it again from the "
            "beginning",
            self.control_topic,
        )
        # A new assignment drops what the consumer fetched from the old position.
        consumer.assign([TopicPartition(self.control_topic, 0, OFFSET_BEGINNING)])
        return True

    def _at(self, consumer: Consumer, high: int) -> bool:
        # The position also moves past transaction markers, which are never delivered.
        (position,) = consumer.position([TopicPartition(self.control_topic, 0)])
        return bool(position.offset >= high)

    def _follow(self, consumer: Consumer) -> None:
        last_log = 0.0
        while not self._closed.is_set():
            try:
                msg = consumer.poll(0.1)
            except (KafkaException, RuntimeError) as e:
                if self._closed.is_set():
                    return
                last_log = _log_rarely(last_log, "control topic consumer: %s", e)
                continue
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                if err.code() != KafkaError._PARTITION_EOF:
                    last_log = _log_rarely(last_log, "control topic consumer: %s", err)
                continue
            self._handle(consumer, msg.key(), msg.value())

    # -- partition counts --------------------------------------------------------------------

    def _follow_metadata(self, metadata: ListTopics) -> None:
        while not self._closed.is_set():
            self._wake.wait(self._refresh)
            self._wake.clear()
            if self._closed.is_set():
                return
            self._refresh_counts(metadata, self._wanted_topics())

    def _refresh_counts(self, metadata: ListTopics, topics: Iterable[str]) -> None:
        for topic in topics:
            try:
                md = metadata(topic, timeout=self._metadata_timeout)
            except KafkaException as e:
                _log.debug("partition count of %r: %s", topic, e)
                continue
            tm = md.topics.get(topic)
            if tm is not None and tm.error is None and tm.partitions:
                self._set_partition_count(topic, len(tm.partitions))
            elif tm is None or (tm.error is not None and _is_unknown_topic(tm.error)):
                self._set_partition_count(topic, None)

    def _set_partition_count(self, topic: str, count: int | None) -> None:
        """Record the topic's partition count (``None``: unknown, its records go to the client)."""
        with self._lock:
            if self._counts.get(topic) == count:
                return
            if count is None:
                del self._counts[topic]
                self._placements.pop(topic)
                self._changed.notify_all()
            else:
                self._counts[topic] = count
                self._replace(topic)

    # -- inspection ----------------------------------------------------------------------------

    def assignment(self, topic: str) -> Assignment | None:
        """The topic's current assignment (in effect or not)."""
        with self._lock:
            return self._book.get(topic)

    def rejected(self) -> dict[str, int]:
        """Control-topic records rejected since start, by reason label (every reason, all topics)."""
        with self._lock:
            out = dict.fromkeys(REJECT_REASONS, 0)
            for (_, reason), n in self._rejected.items():
                out[reason] = out.get(reason, 0) + n
            return out

    def rejected_by_topic(self) -> dict[tuple[str, str], int]:
        """Control-topic records rejected since start, by (topic label, reason label): the
        record's topic if this router produced to it, else :data:`OTHER_TOPIC`."""
        with self._lock:
            return dict(self._rejected)

    def counters(self) -> dict[str, RouteCounters]:
        """The route and partition counters of every topic seen."""
        with self._lock:
            return dict(self._counters)

    def statuses(self) -> list[TopicStatus]:
        """Every topic's epoch, creation time and whether its assignment routes records."""
        with self._lock:
            # Only topics this router placed records for (spec section 10).
            topics = set(self._counters)
            out = []
            for topic in sorted(topics):
                a = self._book.get(topic)
                p = self._placements.get(topic)
                out.append(
                    TopicStatus(
                        topic=topic,
                        epoch=a.epoch if a is not None else 0,
                        created_at_ms=a.created_at_ms if a is not None else None,
                        in_effect=p is not None and p.in_effect,
                    )
                )
            return out

    def adopted_at(self, topic: str, epoch: int) -> float | None:
        """``time.monotonic()`` when the router adopted ``epoch`` of ``topic``, if that is the
        topic's latest adoption."""
        with self._lock:
            latest = self._adopted_at.get(topic)
        return latest[1] if latest is not None and latest[0] == epoch else None

    def wait_until(self, predicate: Callable[[Router], bool], timeout: float) -> bool:
        """Wait until ``predicate(self)`` holds (checked after every state change); ``False`` on
        timeout."""
        deadline = time.monotonic() + timeout
        while not predicate(self):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            with self._changed:
                self._changed.wait(min(remaining, 0.1))
        return True

    def wait_for_epoch(self, topic: str, epoch: int, timeout: float) -> bool:
        """Wait until ``epoch`` of ``topic`` routes its records."""

        def in_effect(r: Router) -> bool:
            p = r.placement(topic)
            return p is not None and p.in_effect and p.assignment is not None and (
                p.assignment.epoch == epoch
            )

        return self.wait_until(in_effect, timeout)


_UNPLACED: tuple[None, None] = (None, None)


def _is_unknown_topic(e: KafkaException | KafkaError) -> bool:
    err = (e.args[0] if e.args else None) if isinstance(e, KafkaException) else e
    return isinstance(err, KafkaError) and err.code() in (
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError._UNKNOWN_TOPIC,
        KafkaError._UNKNOWN_PARTITION,
    )


def _log_rarely(last: float, fmt: str, *args: object) -> float:
    """Log at most every 10 s (librdkafka retries by itself); returns the new last-log time."""
    now = time.monotonic()
    if now - last >= 10.0:
        _log.warning(fmt, *args)
        return now
    return last
