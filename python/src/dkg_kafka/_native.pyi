"""Type stubs of the Rust extension ``dkg_kafka._native`` (``python/rust/lib.rs``, ``python/rust/book.rs``,
``python/rust/consumer.rs``)."""

from collections.abc import Callable, Iterable
from typing import Any, Literal, final

from typing_extensions import Self, TypeAlias, disjoint_base

_Route: TypeAlias = Literal["heavy", "bucket", "split"]
_PlacementRoute: TypeAlias = Literal["heavy", "bucket", "split", "fallback"]
_Outcome: TypeAlias = Literal["accepted", "unchanged", "retracted", "rejected", "reset", "reread"]

__all__ = [
    "REJECT_REASONS",
    "Assignment",
    "AssignmentBook",
    "AssignmentError",
    "CommitSnapshot",
    "ConsumerCore",
    "ControlUpdate",
    "EpochChange",
    "Placement",
    "PlacementTable",
    "ProducerCore",
    "RouteCounters",
    "SplitChange",
    "fnv1a64_partitions",
    "is_connection_setting",
    "kafka_partition",
    "murmur2",
    "spec_random_keys",
]

REJECT_REASONS: tuple[str, ...]
"""Every reject reason label, in the spec's order."""

class AssignmentError(ValueError):
    """An assignment document was rejected."""

    reason: str
    """The reject reason label (``oversize``, ``malformed_json``, ``unsupported_version``,
    ``out_of_range``, ``invalid``)."""

@final
class Assignment:
    """A validated, immutable DKG assignment and its O(1) lookup."""

    @staticmethod
    def from_json(data: bytes) -> Assignment:
        """Decode and validate a document; ``AssignmentError`` with ``.reason`` if invalid."""
    def to_json(self) -> bytes:
        """The compact JSON document."""
    def partition_for(self, key: bytes) -> int:
        """The partition of ``key``; never raises for ``bytes``, ``TypeError`` otherwise. A split
        key's records follow its schedule: each call takes the next partition (spec 4.6)."""
    def route(self, key: bytes) -> tuple[int, _Route]:
        """``(partition, route)`` of ``key``; like :meth:`partition_for` for a split key."""
    def split_of(self, key: bytes) -> list[tuple[int, int]] | None:
        """``[(partition, weight), ...]`` if ``key`` is split, else ``None``; takes no pick."""
    @property
    def has_split_keys(self) -> bool:
        """Whether any heavy key is split (a version 2 document)."""
    def partition_many(self, keys: Iterable[bytes]) -> list[int]:
        """The partitions of many keys in one call."""
    def bucket(self, key: bytes) -> int:
        """The bucket of ``key``."""
    @property
    def topic(self) -> str: ...
    @property
    def partitions(self) -> int: ...
    @property
    def epoch(self) -> int: ...
    @property
    def buckets(self) -> int: ...
    @property
    def table(self) -> list[int]:
        """Bucket -> partition."""
    @property
    def bucket_hash(self) -> tuple[str, int]:
        """``(function, seed)``, e.g. ``("murmur2", 625341585)``."""
    @property
    def heavy(self) -> list[tuple[bytes, int, int]]:
        """Heavy keys as ``(key, partition, weight)``."""
    @property
    def created_at_ms(self) -> int: ...
    @property
    def predicted_load(self) -> list[float]: ...
    def __eq__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class RouteCounters:
    """Records routed for one topic, by route and partition (atomics)."""

    def __new__(cls) -> RouteCounters: ...
    def count_unplaced(self) -> None:
        """Count one keyed record the client placed (partition count not known yet)."""
    def routes(self) -> list[tuple[_PlacementRoute, int]]:
        """``[("heavy", n), ("bucket", n), ("fallback", n)]``."""
    def per_partition(self) -> list[int]:
        """Records per partition (index = partition)."""
    @property
    def unplaced(self) -> int: ...

@final
class Placement:
    """A topic's partition count and current assignment; immutable, swapped whole."""

    def __new__(
        cls,
        partitions: int,
        assignment: Assignment | None,
        counters: RouteCounters,
        *,
        previous: Assignment | None = None,
        previous_known: bool = False,
        epoch_header: str = "moved",
    ) -> Placement:
        """``previous``: the assignment in effect before ``assignment``; ``previous_known=False``:
        the predecessor is unknown (nothing counts as moved); ``epoch_header``: which records
        :meth:`place_stamped` gives a ``dkg-epoch`` value."""
    def place(self, key: bytes) -> int:
        """The partition of ``key``, counted; never raises for ``bytes``."""
    def place_stamped(self, key: bytes) -> tuple[int, bytes | None]:
        """``(partition, dkg-epoch header value or None)``, counted like :meth:`place`."""
    def route(self, key: bytes) -> tuple[int, _PlacementRoute]:
        """``(partition, route)`` of ``key``, not counted."""
    def place_many(self, keys: Iterable[bytes]) -> list[int]:
        """The partitions of many keys, not counted."""
    @property
    def partitions(self) -> int: ...
    @property
    def assignment(self) -> Assignment | None: ...
    @property
    def in_effect(self) -> bool: ...
    @property
    def counters(self) -> RouteCounters: ...

@final
class PlacementTable:
    """Topic -> current :class:`Placement` (the router's); a lookup of the same ``str`` object as
    the last one, with no write since, skips the dict."""

    def __new__(cls) -> Self: ...
    def get(self, topic: str) -> Placement | None:
        """The topic's placement, ``None`` if it has none."""
    def __setitem__(self, topic: str, placement: Placement, /) -> None: ...
    def pop(self, topic: str) -> Placement | None:
        """Remove the topic's placement; returns it (``None`` if it had none)."""
    def __len__(self) -> int: ...

_DeliveryCallback: TypeAlias = Callable[[Any, Any], object]

@disjoint_base
class ProducerCore:
    """The per-record path of ``DkgProducer`` (its base class): ``produce`` in one native call."""

    def __new__(cls, *_args: object, **_kwargs: object) -> Self: ...
    def bind(
        self,
        produce: Callable[..., object],
        placements: PlacementTable,
        unplaced: Callable[[str], object],
    ) -> None:
        """Route :meth:`produce` through ``produce`` (the client's bound ``Producer.produce``),
        placing keyed records by ``placements`` (topic -> :class:`Placement`) and reporting
        records of topics without one to ``unplaced(topic)``; once only (``RuntimeError``)."""
    def produce(
        self,
        topic: str,
        value: str | bytes | None = None,
        key: str | bytes | None = None,
        partition: int = -1,
        on_delivery: _DeliveryCallback | None = None,
        timestamp: int = 0,
        headers: Any = None,
        *,
        callback: _DeliveryCallback | None = None,
    ) -> None:
        """Enqueue a record, as ``confluent_kafka.Producer.produce`` does (same arguments and
        exceptions); keyed records without an explicit partition get their topic's placement."""
    def produce_many(
        self,
        topic: str,
        records: Iterable[tuple[str | bytes | None, str | bytes | None]],
        on_delivery: _DeliveryCallback | None = None,
    ) -> int:
        """Enqueue ``(value, key)`` records of ``topic`` in one call, placed like :meth:`produce`
        by the topic's placement at the start; returns how many were enqueued (fewer than given
        when the client's queue filled: poll and pass the rest again)."""

@final
class ControlUpdate:
    """What one control-topic record did to an :class:`AssignmentBook`."""

    @property
    def outcome(self) -> _Outcome: ...
    @property
    def topic(self) -> str | None: ...
    @property
    def reason(self) -> str | None: ...
    @property
    def detail(self) -> str | None: ...
    @property
    def assignment(self) -> Assignment | None: ...

@final
class AssignmentBook:
    """The control topic's validated state (the Rust ``dkg_kafka_protocol::book::AssignmentBook``)."""

    def __new__(cls, max_value_bytes: int | None = None) -> AssignmentBook: ...
    def apply(self, key: bytes | None, value: bytes | None) -> ControlUpdate:
        """Apply one record; ``value=None`` is a tombstone."""
    def get(self, topic: str) -> Assignment | None: ...
    def topics(self) -> list[str]: ...
    @property
    def max_value_bytes(self) -> int: ...
    def __len__(self) -> int: ...

def murmur2(data: bytes) -> int:
    """Kafka's murmur2 as Java's ``Utils.murmur2`` returns it (signed 32-bit)."""

def is_connection_setting(key: str) -> bool:
    """Whether a librdkafka setting is connection-level (the control topic's reader inherits it)."""

def kafka_partition(key: bytes, partitions: int) -> int:
    """Kafka's default placement: ``to_positive(murmur2(key)) % partitions``."""

def fnv1a64_partitions(partitions: list[int]) -> str:
    """FNV-1a 64 over each partition as 4 LE bytes, as 16 hex digits (``random.json``)."""

def spec_random_keys(seed: int, count: int) -> list[bytes]:
    """The first ``count`` keys of the spec's splitmix64 key stream for ``seed``."""

@final
class CommitSnapshot:
    """A commit to make for one partition: offset (lowest unprocessed) and metadata (C7)."""

    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int:
        """The offset to commit: the lowest offset not processed yet."""
    @property
    def metadata(self) -> str:
        """The commit metadata (the passed map)."""
    @property
    def drained(self) -> int:
        """The drained epoch this commit makes durable."""
    @property
    def window_left_out(self) -> int | None:
        """``None``, or the metadata leaves out its skip window (over the metadata limit) and
        this many unprocessed offsets were in it: a next owner would re-process the records
        processed above ``offset`` (C7)."""

@final
class EpochChange:
    """An epoch drained on one partition of this member (the ``on_epoch`` hook's argument)."""

    @property
    def prev(self) -> Assignment | None:
        """The assignment before (``None``: Kafka's default placement, or unknown)."""
    @property
    def next(self) -> Assignment:
        """The assignment now drained."""
    @property
    def epoch(self) -> int: ...
    @property
    def partition(self) -> int:
        """The partition that drained it."""
    @property
    def owned(self) -> list[int]:
        """The partitions this member owns."""
    def partition_before(self, key: bytes) -> int: ...
    def partition_after(self, key: bytes) -> int: ...
    def moved(self, key: bytes) -> bool: ...
    def moved_out(self, key: bytes) -> bool:
        """The key left ``partition`` for a partition this member does not own: flush and drop
        its state now."""
    def moved_in(self, key: bytes) -> bool: ...
    def split_before(self, key: bytes) -> list[int] | None: ...
    def split_after(self, key: bytes) -> list[int] | None: ...

@final
class SplitChange:
    """A key that became split (``parts``), was split differently, or whole again (``parts``
    empty, ``partition`` its partition) from ``epoch`` on."""

    @property
    def key(self) -> bytes: ...
    @property
    def epoch(self) -> int: ...
    @property
    def parts(self) -> list[int]: ...
    @property
    def partition(self) -> int | None: ...

@final
class ConsumerCore:
    """The consumer protocol's state machine (the Rust core) of one topic and group member."""

    def __new__(
        cls,
        topic: str,
        group: str,
        partitions: int,
        *,
        max_held: int = 10_000,
        stall_timeout: float = 5.0,
        max_metadata_bytes: int = 4096,
        history: int = 32,
        unknown_epoch_wait: float = 10.0,
        max_lease: float = 120.0,
    ) -> Self: ...
    @property
    def topic(self) -> str: ...
    @property
    def group(self) -> str: ...
    @property
    def partitions(self) -> int: ...
    @property
    def split_records(self) -> int: ...
    @property
    def last_split(self) -> int | None:
        """Over how many partitions the last handed-out record's key is split (``None``: whole)."""
    @property
    def last_outcome(self) -> str:
        """What the last ``offer`` decided: ``deliver``, ``held``, ``skipped`` or ``unowned``."""
    @property
    def settled(self) -> int: ...
    @property
    def max_epoch(self) -> int: ...
    def set_clock(self, mono: float, now_ms: int) -> None:
        """Use a caller-set clock from now on (replays, tests)."""
    def set_partitions(self, partitions: int) -> None: ...
    def on_assignment(self, assignment: Assignment) -> None: ...
    def on_handoff(self, key: bytes | None, value: bytes | None) -> str:
        """Apply one handoff-topic record; returns its kind, ``ValueError`` if it did not decode."""
    def tick(self) -> None: ...
    def assign(self, partition: int, committed: int | None, metadata: str | None) -> str | None:
        """Returns a warning for unreadable commit metadata, else ``None``."""
    def initial_progress(self, partition: int) -> tuple[bytes, bytes] | None: ...
    def revoke(self, partition: int) -> None: ...
    def owns(self, partition: int) -> bool: ...
    def owned(self) -> list[int]: ...
    def processed(self) -> None: ...
    def take(self) -> Any:
        """The previous record is processed; then ``True`` (a progress commit is due), the next
        released record, or ``None`` (fetch)."""
    def next_ready(self) -> Any: ...
    def next(
        self,
        client: Any,
        timeout: float | None,
        check_progress: bool,
        batch: int = 500,
    ) -> Any:
        """One poll step over ``client`` (its ``poll`` and ``consume``): ``1`` progress commit
        due, ``2`` housekeeping due, ``3`` not delivered, ``None`` nothing fetched, else a record
        (or an error event)."""
    @property
    def step_elapsed(self) -> float:
        """Seconds since the last ``next`` began."""
    def defer_housekeeping(self, seconds: float) -> None: ...
    def batch(self, out: list[Any], max: int, check_progress: bool) -> bool:
        """Fill a ``consume()`` batch from released and pushed records; whether a progress
        commit is due."""
    def released(self, fetched: list[Any] | None, max: int, check_progress: bool) -> list[Any] | None:
        """``push(fetched)`` then ``batch`` into a new list (``fetched`` itself when all of it is
        of quiet partitions); ``None``: a progress commit is due before any record."""
    def push(self, msgs: list[Any]) -> None:
        """Fetched records, offered in order by ``next`` and ``batch``."""
    @property
    def pending(self) -> int: ...
    def offer(self, msg: Any) -> bool:
        """A fetched record (``partition()``, ``offset()``, ``key()``, ``headers()``): ``True`` =
        hand it out now."""
    def offer_record(
        self, partition: int, offset: int, key: bytes | None, epoch: int | None, msg: Any
    ) -> bool: ...
    def progress_due(self) -> list[int]: ...
    def take_drained_epochs(self, partition: int) -> list[EpochChange]: ...
    def snapshot(self, partition: int) -> CommitSnapshot | int | None:
        """What to commit; ``None`` before the first record; the metadata's size if over the limit."""
    def mark_durable(self, partition: int) -> tuple[bytes, bytes] | None: ...
    def committed(self, snapshot: CommitSnapshot) -> tuple[bytes, bytes] | None: ...
    def flow(self) -> tuple[list[int], list[int]]: ...
    def take_stalled(self) -> list[tuple[int, int]]: ...
    def take_split_changes(self) -> list[SplitChange]: ...
    def take_hold_times(self) -> list[float]: ...
    def take_anomalies(self) -> tuple[int, int, dict[str, int], int]:
        """``(unknown_epoch_records, clamped_leases, {reason: markers rejected},
        windows_left_out)`` since the last call; the last: commit snapshots whose metadata left out
        the skip window (C7)."""
    def held_counts(self) -> list[tuple[int, int]]: ...
    def positions(self) -> list[tuple[int, int | None]]: ...
    def records(self) -> list[int]: ...
    def latest(self) -> Assignment | None: ...
    def garbage(self) -> list[str]: ...
