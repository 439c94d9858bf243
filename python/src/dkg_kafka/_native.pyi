"""Type stubs of the Rust extension ``dkg_kafka._native`` (``python/rust/lib.rs``, ``python/rust/book.rs``)."""

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
    "ControlUpdate",
    "Placement",
    "PlacementTable",
    "ProducerCore",
    "RouteCounters",
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
    """The control topic's validated state (the Rust ``dkg_protocol::book::AssignmentBook``)."""

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
