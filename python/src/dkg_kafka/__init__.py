"""DKG (skew-aware key partitioning) for confluent-kafka producers, on the Rust core.

Replace ``confluent_kafka.Producer(conf)`` with ``dkg_kafka.DkgProducer(conf)``: keyed records then
go where the topic's current DKG assignment (published on the control topic by ``dkg-sampler``)
puts them, exactly where the Rust and Java producers put them, and to Kafka's murmur2 placement
while there is none. The lookup, the document's validation and the control-topic rules are the
Rust core's (``dkg_kafka._native``); the wire format is ``docs/spec.md``. ``dkg_kafka.DkgConsumer(conf)``
(for ``confluent_kafka.Consumer``) keeps each key's order across epoch switches, driving the Rust
consumer's protocol core (``docs/spec.md`` 9.3).
"""

from __future__ import annotations

from ._native import (
    REJECT_REASONS,
    Assignment,
    AssignmentBook,
    AssignmentError,
    CommitSnapshot,
    ConsumerCore,
    ControlUpdate,
    EpochChange,
    Placement,
    RouteCounters,
    SplitChange,
    kafka_partition,
    murmur2,
)
from .consumer import DEFAULT_HANDOFF_TOPIC, DkgConsumer
from .producer import DkgProducer
from .router import DEFAULT_CONTROL_TOPIC, Router, TopicStatus

__all__ = [
    "DEFAULT_CONTROL_TOPIC",
    "DEFAULT_HANDOFF_TOPIC",
    "REJECT_REASONS",
    "Assignment",
    "AssignmentBook",
    "AssignmentError",
    "CommitSnapshot",
    "ConsumerCore",
    "ControlUpdate",
    "DkgConsumer",
    "DkgProducer",
    "EpochChange",
    "Placement",
    "RouteCounters",
    "Router",
    "TopicStatus",
    "kafka_partition",
    "murmur2",
]
