"""Prometheus metrics of the router, with the Rust producer's names (``prometheus_client``).

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

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from . import _native
from .router import OTHER_TOPIC

if TYPE_CHECKING:
    from .router import Router


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
            for reason in _native.REJECT_REASONS:
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


def register(router: Router, registry: Any) -> RouterCollector:
    """Register the router's metrics in ``registry`` (a ``prometheus_client.CollectorRegistry``).

    Raises ``ImportError`` with an install hint when ``prometheus_client`` is missing.
    """
    try:
        import prometheus_client  # noqa: F401
    except ImportError as e:
        raise ImportError(
            "dkg_kafka metrics need prometheus_client: pip install 'dkg-kafka[metrics]'"
        ) from e
    collector = RouterCollector(router)
    registry.register(collector)
    return collector
