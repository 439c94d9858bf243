"""``DkgProducer``: a ``confluent_kafka.Producer`` that places keyed records by DKG.

confluent-kafka cannot take a Python partitioner (librdkafka would call it from its own threads),
so the wrapper computes the partition itself and passes ``partition=``, the maintainers' advice.
Every keyed record without an explicit partition gets one: the assignment's, or Kafka's murmur2
placement when none is in effect, so Python, Java and Rust producers agree on every key.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import Producer

from ._config import producer_config
from .router import DEFAULT_CONTROL_TOPIC, Router

DeliveryCallback = Callable[[Any, Any], None]


class DkgProducer:
    """Drop-in for ``confluent_kafka.Producer``: ``Producer(conf)`` becomes ``DkgProducer(conf)``.

    ``produce`` has the client's signature. Keyless records and records with an explicit
    partition are passed through untouched; keyed ones (``bytes`` or ``str``) get the partition of
    their topic's current assignment. ``enable.idempotence=true`` and ``acks=all`` apply unless
    ``conf`` sets them (a ``RuntimeWarning`` when turned off); ``partitioner`` defaults to
    ``murmur2_random`` for the records placed before a topic's partition count is known.

    Args:
        conf: the ``confluent_kafka.Producer`` configuration.
        control_topic: the DKG control topic.
        registry: a ``prometheus_client.CollectorRegistry`` for the ``dkg_producer_*`` metrics
            (requires ``prometheus_client``); ``None`` registers nothing.
        startup_timeout: seconds to read the control topic to its end (``TimeoutError``).
        metadata_refresh_interval: seconds between partition count refreshes.
        epoch_header: which keyed records get a ``dkg-epoch`` header (``"moved"``, the default
            and the Rust producer's: records of keys the latest assignment moved, what
            ``DkgConsumer`` holds back to keep each key in order; ``"all"``; ``"off"``), appended
            after the record's own headers.
        router: a started :class:`Router` to share (its lifetime stays the caller's; it reads
            partition counts through its own client and keeps its own ``epoch_header``).

    Other ``Producer`` methods (``list_topics``, transactions...) are forwarded unchanged.
    """

    def __init__(
        self,
        conf: Mapping[str, Any],
        *,
        control_topic: str = DEFAULT_CONTROL_TOPIC,
        registry: Any = None,
        startup_timeout: float = 30.0,
        metadata_refresh_interval: float = 5.0,
        epoch_header: str = "moved",
        router: Router | None = None,
    ) -> None:
        self._producer = Producer(producer_config(conf))
        self._owns_router = router is None
        if router is None:
            # Partition counts from this producer's own client (spec 7.2: the client must know a
            # partition before it accepts it explicitly).
            router = Router(
                conf,
                control_topic=control_topic,
                startup_timeout=startup_timeout,
                metadata_refresh_interval=metadata_refresh_interval,
                list_topics=self._producer.list_topics,
                epoch_header=epoch_header,
            ).start()
        self.router = router
        try:
            if registry is not None:
                from .metrics import register

                register(router, registry)
        except BaseException:
            if self._owns_router:
                router.close()
            raise
        self._produce = self._producer.produce
        self._placements = router._placements  # the router swaps entries, never the dict
        self._unplaced = router._unplaced

    def produce(
        self,
        topic: str,
        value: str | bytes | None = None,
        key: str | bytes | None = None,
        partition: int = -1,
        on_delivery: DeliveryCallback | None = None,
        timestamp: int = 0,
        headers: Any = None,
        *,
        callback: DeliveryCallback | None = None,
    ) -> None:
        """Enqueue a record, as ``confluent_kafka.Producer.produce`` does (same arguments, with
        ``callback`` the client's alias of ``on_delivery``; same exceptions: ``BufferError`` when
        the queue is full, ``KafkaException`` otherwise)."""
        # The hot path: one dict lookup and one Rust call per keyed record (no Router frame).
        if key is not None and partition == -1:
            if type(key) is str:
                # What the client would send for a str key.
                key = key.encode("utf-8")
            if type(key) is bytes:
                placement = self._placements.get(topic)
                if placement is not None:
                    partition, epoch = placement.place_stamped(key)
                    if epoch is not None:
                        headers = _with_epoch(headers, epoch)
                else:
                    self._unplaced(topic)
        if on_delivery is None:
            on_delivery = callback
        if on_delivery is None and timestamp == 0 and headers is None:
            self._produce(topic, value, key, partition)
            return
        extra: dict[str, Any] = {}
        if on_delivery is not None:
            extra["on_delivery"] = on_delivery
        if timestamp:
            extra["timestamp"] = timestamp
        if headers is not None:
            extra["headers"] = headers
        self._produce(topic, value, key, partition, **extra)

    def poll(self, timeout: float = -1) -> int:
        """Serve delivery callbacks (``Producer.poll``)."""
        return int(self._producer.poll(timeout))

    def flush(self, timeout: float = -1) -> int:
        """Wait for outstanding records (``Producer.flush``); returns how many are still queued."""
        return int(self._producer.flush(timeout))

    def __len__(self) -> int:
        return len(self._producer)

    def close(self, timeout: float = 30.0) -> int:
        """Flush for up to ``timeout`` seconds and stop following the control topic (a router
        passed in stays open). Returns the records still queued (0 = all delivered)."""
        left = int(self._producer.flush(timeout))
        if self._owns_router:
            self.router.close()
        return left

    def __enter__(self) -> DkgProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getattr__(self, name: str) -> Any:
        # Only reached for names this class does not define.
        if name == "_producer":
            raise AttributeError(name)
        return getattr(self._producer, name)


EPOCH_HEADER = "dkg-epoch"


def _with_epoch(headers: Any, epoch: bytes) -> Any:
    """The record's headers with ``dkg-epoch`` appended after them (spec section 8)."""
    if headers is None:
        return [(EPOCH_HEADER, epoch)]
    items = list(headers.items()) if isinstance(headers, Mapping) else list(headers)
    items.append((EPOCH_HEADER, epoch))
    return items
