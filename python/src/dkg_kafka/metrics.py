"""Prometheus metrics of the router and of ``DkgConsumer``, with the Rust producer's and consumer's
names (``prometheus_client``); the consumer's are :class:`ConsumerCollector`'s.

The same series as ``partitioner/src/kafka/metrics.rs``, so one dashboard serves Rust, Java and
Python producers:

- ``dkg_producer_records_total{topic,route}``: keyed records routed; ``route`` = ``heavy`` /
  ``bucket`` / ``split`` (by the assignment) or ``fallback`` (Kafka's murmur2 placement);
- ``dkg_producer_partition_records_total{topic,partition}``: keyed records per partition (records
  the client placed before the partition count was known count as ``fallback`` only);
- ``dkg_producer_epoch{topic}``: epoch of the current assignment, 0 = none;
- ``dkg_producer_assignment_in_effect{topic}``: 1 while the assignment routes records;
- ``dkg_producer_assignment_age_seconds{topic}``: now minus the document's ``created_at_ms``
  (the publisher's clock, clamped at 0); absent without an assignment;
- ``dkg_producer_assignments_rejected_total{topic,reason}``: control-topic records rejected, by
  the record's topic when this router produced to it, else ``topic="(other)"`` (bounded by the
  producer's own topics); one series per reason from the start for ``(other)`` and for each topic
  once produced to.

Counting happens in Rust atomics on the produce path; this collector reads them at scrape time, so
routing a record never touches ``prometheus_client``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from confluent_kafka import Consumer, KafkaException, TopicPartition

from ._native import REJECT_REASONS, ConsumerCore
from .router import OTHER_TOPIC

if TYPE_CHECKING:
    from .router import Router


class ConsumerView(Protocol):
    """What :class:`ConsumerCollector` reads of a ``DkgConsumer`` (a protocol, so this module does not
    import the consumer's)."""

    @property
    def member(self) -> str: ...
    @property
    def topic(self) -> str: ...
    @property
    def core(self) -> ConsumerCore: ...
    @property
    def metrics(self) -> ConsumerMetricsState: ...


class ConsumerMetricsState:
    """What the metrics collector reads: gauges and histogram counts refreshed at housekeeping
    (every 100 ms while polling), replaced whole so a scrape on another thread reads one state."""

    BUCKETS = (
        0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,
        0.25, 0.3, 0.4, 0.5, 0.75, 1.0, 2.0, 5.0, 10.0, 30.0,
    )

    def __init__(self) -> None:
        self.held: dict[int, int] = {}
        self.lag: dict[int, int] = {}
        self.hold_counts = [0] * (len(self.BUCKETS) + 1)
        self.hold_sum = 0.0
        self.unknown_epoch = 0
        self.clamped_leases = 0
        self.windows_left_out = 0
        self.markers_rejected: dict[str, int] = {}
        self._lock = threading.Lock()

    def update(self, client: Consumer, topic: str, core: ConsumerCore) -> None:
        held = dict(core.held_counts())
        lag = {}
        for p, pos in core.positions():
            if pos is None:
                continue
            try:
                _, high = client.get_watermark_offsets(TopicPartition(topic, p), cached=True)
            except KafkaException:
                continue
            if high >= 0:
                lag[p] = max(0, high - pos)
        times = core.take_hold_times()
        unknown, clamped, rejected, left_out = core.take_anomalies()
        with self._lock:
            self.held, self.lag = held, lag
            for t in times:
                i = next((i for i, le in enumerate(self.BUCKETS) if t <= le), len(self.BUCKETS))
                self.hold_counts[i] += 1
                self.hold_sum += t
            self.unknown_epoch += unknown
            self.clamped_leases += clamped
            self.windows_left_out += left_out
            for reason, n in rejected.items():
                self.markers_rejected[reason] = self.markers_rejected.get(reason, 0) + n

    def forget(self, partitions: list[int]) -> None:
        with self._lock:
            self.held = {p: n for p, n in self.held.items() if p not in partitions}
            self.lag = {p: n for p, n in self.lag.items() if p not in partitions}

    def snapshot(self) -> ConsumerMetricsState:
        """A copy taken under the lock (for a scrape)."""
        with self._lock:
            out = ConsumerMetricsState()
            out.held, out.lag = dict(self.held), dict(self.lag)
            out.hold_counts, out.hold_sum = list(self.hold_counts), self.hold_sum
            out.unknown_epoch, out.clamped_leases = self.unknown_epoch, self.clamped_leases
            out.windows_left_out = self.windows_left_out
            out.markers_rejected = dict(self.markers_rejected)
            return out




class RouterCollector:
    """A ``prometheus_client`` custom collector over a :class:`~dkg_kafka.router.Router`."""

    def __init__(self, router: Router) -> None:
        self._router = router

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        records = CounterMetricFamily(
            "dkg_producer_records",
            "Keyed records routed by the DKG producer wrapper, by route (heavy, bucket, split, fallback).",
            labels=["topic", "route"],
        )
        per_partition = CounterMetricFamily(
            "dkg_producer_partition_records",
            "Keyed records routed by the DKG producer wrapper to each partition.",
            labels=["topic", "partition"],
        )
        for topic, counters in sorted(self._router.counters().items()):
            for route, n in counters.routes():
                records.add_metric([topic, route], n)
            for partition, n in enumerate(counters.per_partition()):
                per_partition.add_metric([topic, str(partition)], n)
        rejected = CounterMetricFamily(
            "dkg_producer_assignments_rejected",
            "Control-topic records rejected by the DKG producer wrapper, by topic (this producer's, "
            "else (other)) and reason.",
            labels=["topic", "reason"],
        )
        counts = self._router.rejected_by_topic()
        for topic in [OTHER_TOPIC, *sorted(self._router.counters())]:
            for reason in REJECT_REASONS:
                rejected.add_metric([topic, reason], counts.get((topic, reason), 0))
        epoch = GaugeMetricFamily(
            "dkg_producer_epoch",
            "Epoch of the topic's current DKG assignment (0 = none).",
            labels=["topic"],
        )
        in_effect = GaugeMetricFamily(
            "dkg_producer_assignment_in_effect",
            "1 while the topic's current assignment routes records; 0 while there is none or its "
            "partition count differs from the topic's.",
            labels=["topic"],
        )
        age = GaugeMetricFamily(
            "dkg_producer_assignment_age_seconds",
            "Seconds since the topic's current assignment was created (its created_at_ms), at scrape.",
            labels=["topic"],
        )
        now_ms = time.time() * 1000.0
        for status in self._router.statuses():
            epoch.add_metric([status.topic], status.epoch)
            in_effect.add_metric([status.topic], int(status.in_effect))
            if status.created_at_ms is not None:
                age.add_metric([status.topic], max(0.0, now_ms - status.created_at_ms) / 1000.0)
        yield from (records, per_partition, rejected, epoch, in_effect, age)


_Collector = TypeVar("_Collector", "RouterCollector", "ConsumerCollector")


def _registered(collector: _Collector, registry: Any) -> _Collector:
    """``collector`` registered in ``registry``; ``ImportError`` with an install hint when
    ``prometheus_client`` is missing."""
    try:
        import prometheus_client  # noqa: F401
    except ImportError as e:
        raise ImportError(
            "dkg_kafka metrics need prometheus_client: pip install 'dkg-kafka[metrics]'"
        ) from e
    registry.register(collector)
    return collector


def register(router: Router, registry: Any) -> RouterCollector:
    """Register the router's metrics in ``registry`` (a ``prometheus_client.CollectorRegistry``).

    Raises ``ImportError`` with an install hint when ``prometheus_client`` is missing.
    """
    return _registered(RouterCollector(router), registry)


class ConsumerCollector:
    """A ``prometheus_client`` custom collector over a :class:`~dkg_kafka.consumer.DkgConsumer`:
    the Rust consumer's series (``partitioner/src/kafka/consumer/metrics.rs``, ``docs/metrics.md``),
    same names, labels and meanings, each with the constant label ``member``:

    - ``dkg_consumer_records_total{topic,partition}``: records handed to the application;
    - ``dkg_consumer_member_records_total{topic}``: the same per member;
    - ``dkg_consumer_lag_records{topic,partition}``: end of the partition (the client's cached high
      watermark) minus the lowest unprocessed offset: held records count as lag;
    - ``dkg_consumer_held_records{topic,partition}``: records of moved keys held back right now;
    - ``dkg_consumer_hold_seconds{topic}``: how long each held record was held (histogram);
    - ``dkg_consumer_split_records_total{topic}``: records handed out whose key is split;
    - ``dkg_consumer_untrusted_records_total{topic,reason}``: ``reason="unknown_epoch"`` (C19);
    - ``dkg_consumer_clamped_leases_total{topic}``: lease expiries clamped to ``max_lease`` (C2);
    - ``dkg_consumer_commit_windows_left_out_total{topic}``: commits whose metadata left out the
      skip window (over ``max_metadata_bytes``, about 900 unprocessed offsets; C7): a next owner
      re-processes what was processed above the committed offset;
    - ``dkg_consumer_markers_rejected_total{topic,reason}``: marker records skipped, by reason.

    Record counts are the extension's (counted in Rust as records are handed out); gauges and the
    histogram are refreshed at the consumer's housekeeping (every 100 ms while it polls). Gauges
    cover owned partitions only (a revoked partition's series go with it).
    """

    def __init__(self, consumer: ConsumerView) -> None:
        self._consumer = consumer

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import (
            CounterMetricFamily,
            GaugeMetricFamily,
            HistogramMetricFamily,
        )

        c = self._consumer
        member = c.member
        topic = c.topic
        core = c.core
        state = c.metrics.snapshot()

        def labels(*names: str) -> list[str]:
            return [*names, "member"]

        records = CounterMetricFamily(
            "dkg_consumer_records",
            "Records handed to the application by the DKG consumer, per partition.",
            labels=labels("topic", "partition"),
        )
        per_partition = core.records()
        for p, n in enumerate(per_partition):
            if n:
                records.add_metric([topic, str(p), member], n)
        member_records = CounterMetricFamily(
            "dkg_consumer_member_records",
            "Records handed to the application by the DKG consumer, per group member.",
            labels=labels("topic"),
        )
        member_records.add_metric([topic, member], sum(per_partition))
        lag = GaugeMetricFamily(
            "dkg_consumer_lag_records",
            "Records behind the end of each partition (end minus lowest unprocessed offset).",
            labels=labels("topic", "partition"),
        )
        for p, n in sorted(state.lag.items()):
            lag.add_metric([topic, str(p), member], n)
        held = GaugeMetricFamily(
            "dkg_consumer_held_records",
            "Records of keys that an epoch moved, held back until the key's older records on its "
            "previous partition are processed (ordering-safe migration).",
            labels=labels("topic", "partition"),
        )
        for p, n in sorted(state.held.items()):
            held.add_metric([topic, str(p), member], n)
        hold = HistogramMetricFamily(
            "dkg_consumer_hold_seconds",
            "How long records of moved keys were held.",
            labels=labels("topic"),
        )
        cumulative, buckets = 0, []
        for le, n in zip((*state.BUCKETS, float("inf")), state.hold_counts):
            cumulative += n
            buckets.append(("+Inf" if le == float("inf") else repr(le), cumulative))
        hold.add_metric([topic, member], buckets, state.hold_sum)
        split = CounterMetricFamily(
            "dkg_consumer_split_records",
            "Records handed to the application whose key is split over several partitions in "
            "their epoch (no per-key order across the parts).",
            labels=labels("topic"),
        )
        split.add_metric([topic, member], core.split_records)
        untrusted = CounterMetricFamily(
            "dkg_consumer_untrusted_records",
            "Records whose dkg-* headers the ordering protocol could not trust, handed to the "
            "application as data, by reason.",
            labels=labels("topic", "reason"),
        )
        untrusted.add_metric([topic, "unknown_epoch", member], state.unknown_epoch)
        clamped = CounterMetricFamily(
            "dkg_consumer_clamped_leases",
            "Producer leases read with an expiry beyond the consumer's max_lease from now "
            "(clamped to it).",
            labels=labels("topic"),
        )
        clamped.add_metric([topic, member], state.clamped_leases)
        left_out = CounterMetricFamily(
            "dkg_consumer_commit_windows_left_out",
            "Offset commits whose metadata left out the skip window (unprocessed offsets over the "
            "metadata limit): a next owner re-processes the records processed above the "
            "committed offset.",
            labels=labels("topic"),
        )
        left_out.add_metric([topic, member], state.windows_left_out)
        rejected = CounterMetricFamily(
            "dkg_consumer_markers_rejected",
            "Marker records on the handoff topic skipped by the consumer, by reason.",
            labels=labels("topic", "reason"),
        )
        for reason in MARKER_REJECT_REASONS:
            rejected.add_metric([topic, reason, member], state.markers_rejected.get(reason, 0))
        yield from (
            records,
            member_records,
            lag,
            held,
            hold,
            split,
            untrusted,
            clamped,
            left_out,
            rejected,
        )


# The Rust core's MarkerReject labels, in its order (one series each from the start).
MARKER_REJECT_REASONS = ("oversize", "malformed_json", "key_mismatch", "invalid", "partition_count")


def register_consumer(consumer: ConsumerView, registry: Any) -> ConsumerCollector:
    """Register the consumer's metrics in ``registry`` (a ``prometheus_client.CollectorRegistry``).

    Raises ``ImportError`` with an install hint when ``prometheus_client`` is missing.
    """
    return _registered(ConsumerCollector(consumer), registry)
