"""Shared fixtures: the real broker (a missing one fails the tests, never skips), topics, documents.

The broker is ``DKG_TEST_BOOTSTRAP`` (default ``127.0.0.1:9092``), the one ``scripts/kafka`` starts.
"""

from __future__ import annotations

import base64
import json
import os
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

import dkg_kafka

REPO_ROOT = Path(__file__).resolve().parents[2]
VECTORS = REPO_ROOT / "spec" / "vectors"


@pytest.fixture(scope="session")
def bootstrap() -> str:
    """The broker's address, after checking it answers metadata within 10 s (else an error)."""
    address = os.environ.get("DKG_TEST_BOOTSTRAP", "127.0.0.1:9092")
    admin = AdminClient({"bootstrap.servers": address})
    try:
        md = admin.list_topics(timeout=10)
    except KafkaException as e:
        raise RuntimeError(
            f"no Kafka broker at {address} (DKG_TEST_BOOTSTRAP): {e}; start one with scripts/kafka start"
        ) from e
    if not md.brokers:
        raise RuntimeError(f"the Kafka cluster at {address} reports no brokers")
    return address


# Topics this session created, deleted at its end (the 10^6-record test alone writes ~100 MB).
_CREATED: list[str] = []


@pytest.fixture(scope="session")
def admin(bootstrap: str) -> Iterator[AdminClient]:
    client = AdminClient({"bootstrap.servers": bootstrap})
    yield client
    if _CREATED:
        futures = client.delete_topics(list(_CREATED), operation_timeout=30)
        for future in futures.values():
            future.result(timeout=60)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def create_topic(
    admin: AdminClient, name: str, partitions: int, config: dict[str, str] | None = None
) -> str:
    """Create ``name`` and wait until its metadata shows every partition."""
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1, config=config or {})]
    )
    futures[name].result(timeout=30)
    _CREATED.append(name)
    wait_partitions(admin, name, partitions)
    return name


def wait_partitions(admin: AdminClient, name: str, partitions: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while True:
        tm = admin.list_topics(name, timeout=10).topics.get(name)
        if tm is not None and tm.error is None and len(tm.partitions) == partitions:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"topic {name} did not reach {partitions} partitions")
        time.sleep(0.1)


# Room for the largest document (8 MiB) and one byte more, as the Rust ensure_control_topic sets it.
CONTROL_MAX_BYTES = 9 * 1024 * 1024


@pytest.fixture
def control_topic(admin: AdminClient) -> str:
    """A fresh compacted one-partition control topic."""
    config = {"cleanup.policy": "compact", "max.message.bytes": str(CONTROL_MAX_BYTES)}
    return create_topic(admin, unique("dkg-test-control"), 1, config)


class Publisher:
    """Writes control-topic records and waits for each acknowledgement."""

    def __init__(self, bootstrap: str, control_topic: str) -> None:
        self.topic = control_topic
        self._producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "message.max.bytes": CONTROL_MAX_BYTES + 64 * 1024,
            }
        )

    def send(self, key: bytes | None, value: bytes | None) -> None:
        errors: list[Any] = []
        self._producer.produce(
            self.topic, value=value, key=key, on_delivery=lambda err, _msg: errors.append(err)
        )
        left = self._producer.flush(30)
        assert left == 0, "control record not delivered in 30 s"
        assert errors == [None], f"control record failed: {errors}"

    def publish(self, document: bytes) -> None:
        topic = json.loads(document)["topic"]
        self.send(topic.encode(), document)

    def retract(self, topic: str) -> None:
        self.send(topic.encode(), None)


@pytest.fixture
def publisher(bootstrap: str, control_topic: str) -> Publisher:
    return Publisher(bootstrap, control_topic)


def document(
    topic: str,
    partitions: int,
    epoch: int,
    table: Sequence[int],
    heavy: Sequence[tuple[bytes, int]] = (),
    seed: int = 0x2545F491,
    created_at_ms: int | None = None,
) -> bytes:
    """An assignment document (format ``dkg.assignment`` v1) as the sampler writes it."""
    doc = {
        "format": "dkg.assignment",
        "version": 1,
        "topic": topic,
        "partitions": partitions,
        "epoch": epoch,
        "bucket_hash": {"function": "murmur2", "seed": seed},
        "buckets": len(table),
        "table": list(table),
        "heavy": [
            {"key_b64": base64.b64encode(k).decode(), "partition": p, "weight": 100}
            for k, p in heavy
        ],
        "params": {"theta": 0.01, "epsilon": 0.005, "mu": 4.0, "window_records": 1000},
        "created_at_ms": int(time.time() * 1000) if created_at_ms is None else created_at_ms,
        "predicted_load": [1.0 / partitions] * partitions,
    }
    return json.dumps(doc, separators=(",", ":")).encode()


def v2_document(doc: bytes, generation: str) -> bytes:
    """``doc`` as a version 2 document naming control-topic generation ``generation``."""
    d = json.loads(doc)
    d["version"] = 2
    d["generation"] = generation
    return json.dumps(d).encode()


def generation_record(generation: str) -> bytes:
    """The value of the control topic's ``@generation`` record (spec 6.4)."""
    record = {"format": "dkg.assignment", "version": 2, "kind": "generation"}
    return json.dumps({**record, "generation": generation}).encode()


def rotated(topic: str, partitions: int, epoch: int, shift: int, buckets: int = 64) -> bytes:
    """A document whose table is ``(bucket + shift) % partitions``, one heavy key ``hot``."""
    table = [(b + shift) % partitions for b in range(buckets)]
    return document(topic, partitions, epoch, table, [(b"hot", (shift + 1) % partitions)])


def read_all(bootstrap: str, topic: str, partitions: int, timeout: float = 120) -> list[Any]:
    """Every record of ``topic`` up to the high watermarks as of this call."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("dkg-test-reader"),
            "enable.auto.commit": False,
            "enable.partition.eof": False,
        }
    )
    try:
        tps = [TopicPartition(topic, p, -2) for p in range(partitions)]
        highs = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(partitions)
        }
        pending = {p for p, high in highs.items() if high > 0}
        consumer.assign(tps)
        out: list[Any] = []
        deadline = time.monotonic() + timeout
        while pending:
            assert time.monotonic() < deadline, f"read back timed out; missing partitions {pending}"
            for msg in consumer.consume(num_messages=10_000, timeout=0.5):
                err = msg.error()
                assert err is None, f"consumer error: {err}"
                out.append(msg)
                p, offset = msg.partition(), msg.offset()
                assert p is not None and offset is not None
                if offset + 1 >= highs[p]:
                    pending.discard(p)
        return out
    finally:
        consumer.close()


@pytest.fixture
def router_factory(
    bootstrap: str, control_topic: str
) -> Iterator[Any]:
    """Builds started routers on the test's control topic and closes them afterwards."""
    routers: list[dkg_kafka.Router] = []

    def make(**kwargs: Any) -> dkg_kafka.Router:
        kwargs.setdefault("metadata_refresh_interval", 0.3)
        r = dkg_kafka.Router(
            {"bootstrap.servers": bootstrap}, control_topic=control_topic, **kwargs
        ).start()
        routers.append(r)
        return r

    yield make
    for r in routers:
        r.close()


def vector_file(name: str) -> Any:
    """A golden vector file of ``spec/vectors`` (missing = the test fails)."""
    path = VECTORS / name
    assert path.is_file(), f"golden vectors missing: {path} (spec/vectors is part of the repo)"
    return json.loads(path.read_text())


class FakeMsg:
    """What ``ConsumerCore.offer`` and ``DkgConsumer`` read of a ``confluent_kafka.Message`` (of
    topic ``orders``)."""

    def __init__(
        self,
        partition: int,
        offset: int,
        key: bytes | None,
        epoch: int | None = None,
        *,
        headers: Any = None,
    ) -> None:
        """``headers`` as confluent-kafka gives them, else one ``dkg-epoch`` header of ``epoch``."""
        self._p, self._o, self._k = partition, offset, key
        self._h = headers if epoch is None else [("dkg-epoch", str(epoch).encode())]

    def partition(self) -> int:
        return self._p

    def offset(self) -> int:
        return self._o

    def key(self) -> bytes | None:
        return self._k

    def value(self) -> bytes:
        return b"v"

    def headers(self) -> Any:
        return self._h

    def topic(self) -> str:
        return "orders"

    def error(self) -> None:
        return None

    def __repr__(self) -> str:
        return f"FakeMsg({self._p}, {self._o}, {self._k!r})"
