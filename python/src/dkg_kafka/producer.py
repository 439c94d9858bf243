"""``DkgProducer``: a ``confluent_kafka.Producer`` that places keyed records by DKG.

confluent-kafka cannot take a Python partitioner (librdkafka would call it from its own threads),
so the wrapper computes the partition itself and passes ``partition=``, the maintainers' advice.
``produce`` is the extension's ``ProducerCore.produce`` (``python/rust/produce.rs``): one native call
per record that places it and calls the client's ``produce`` once. Every keyed record without an explicit partition gets one: the assignment's, or Kafka's murmur2
placement when none is in effect, so Python, Java and Rust producers agree on every key.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import Producer

from ._native import ProducerCore
from ._config import producer_config
from .router import DEFAULT_CONTROL_TOPIC, Router


def _forward(name: str) -> Callable[..., Any]:
    """A method calling the client's method ``name`` (its docstring too)."""

    def forward(self: DkgProducer, *args: Any, **kwargs: Any) -> Any:
        return getattr(self._producer, name)(*args, **kwargs)

    forward.__name__ = name
    forward.__qualname__ = f"DkgProducer.{name}"
    # None where the installed client is older than the method (calling it raises AttributeError).
    forward.__doc__ = getattr(getattr(Producer, name, None), "__doc__", None)
    return forward


class DkgProducer(ProducerCore):
    """Drop-in for ``confluent_kafka.Producer``: ``Producer(conf)`` becomes ``DkgProducer(conf)``.

    ``produce`` has the client's signature and exceptions. Keyless records and records with an
    explicit partition are passed through untouched; keyed ones (``bytes`` or ``str``) get the partition of
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
        epoch_header: which keyed records get a ``dkg-epoch`` header, appended after the
            record's own headers: ``"auto"`` (the default and the Rust producer's without
            ordering: none, since ``DkgConsumer`` uses a record's epoch only together with its
            producer's lease and markers, which this package does not write), ``"moved"``
            (records of keys the latest assignment moved), ``"all"``, ``"off"``.
        router: a started :class:`Router` to share (its lifetime stays the caller's; it reads
            partition counts through its own client and keeps its own ``epoch_header``).

    ``produce_many(topic, [(value, key), ...])`` is a batch ``produce`` (one native call; returns
    how many records went). Other ``Producer`` methods (``list_topics``, transactions...) are
    forwarded unchanged; the client's ``produce_batch`` does not place keys by DKG.
    """

    def __init__(
        self,
        conf: Mapping[str, Any],
        *,
        control_topic: str = DEFAULT_CONTROL_TOPIC,
        registry: Any = None,
        startup_timeout: float = 30.0,
        metadata_refresh_interval: float = 5.0,
        epoch_header: str = "auto",
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
        # produce() is the extension's (ProducerCore): per record one native call that places
        # the key and calls the client's produce once.
        self.bind(self._producer.produce, router._placements, router._unplaced)

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

    # The client's other public methods, forwarded as methods of the class rather than through
    # __getattr__: a class with __getattr__ makes every attribute lookup on its instances slow,
    # `producer.produce` included (about 600 more instructions a call). A test checks that this
    # list covers the installed client's methods.
    abort_transaction = _forward("abort_transaction")
    begin_transaction = _forward("begin_transaction")
    cluster_id = _forward("cluster_id")
    commit_transaction = _forward("commit_transaction")
    init_transactions = _forward("init_transactions")
    list_topics = _forward("list_topics")
    produce_batch = _forward("produce_batch")
    purge = _forward("purge")
    send_offsets_to_transaction = _forward("send_offsets_to_transaction")
    set_sasl_credentials = _forward("set_sasl_credentials")
