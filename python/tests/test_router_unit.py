"""Router and DkgProducer logic without the network: configuration, swaps under concurrency."""

from __future__ import annotations

import threading
import warnings

import pytest
from confluent_kafka import OFFSET_BEGINNING, Producer, TopicPartition

import dkg_kafka
from dkg_kafka import Assignment, Router
from dkg_kafka._config import connection_config, control_consumer_config, producer_config

from .conftest import generation_record, rotated, v2_document


def test_connection_config_keeps_only_connection_settings() -> None:
    conf = {
        "bootstrap.servers": "b:1",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "ssl.ca.location": "/ca",
        "acks": "1",
        "linger.ms": 20,
        "client.id": "app",
    }
    out = connection_config(conf)
    assert out == {
        "bootstrap.servers": "b:1",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "ssl.ca.location": "/ca",
        "client.id": "app-dkg-control",
    }
    consumer = control_consumer_config({"bootstrap.servers": "b:1"})
    assert consumer["client.id"] == "dkg-control"
    assert consumer["enable.auto.commit"] is False
    assert consumer["fetch.wait.max.ms"] == 100


def test_producer_defaults_apply_only_where_unset_and_weakening_warns() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = producer_config({"bootstrap.servers": "b:1", "linger.ms": 5})
    assert out["enable.idempotence"] is True
    assert out["acks"] == "all"
    assert out["partitioner"] == "murmur2_random"
    assert out["linger.ms"] == 5
    for weaker, match in (
        ({"enable.idempotence": False}, "enable.idempotence"),
        ({"acks": "1", "enable.idempotence": False}, "acks"),
        ({"partitioner": "consistent_random"}, "partitioner"),
    ):
        with pytest.warns(RuntimeWarning) as record:
            kept = producer_config({"bootstrap.servers": "b:1", **weaker})
        assert any(match in str(w.message) for w in record), match
        for k, v in weaker.items():
            assert kept[k] == v
    # A weaker acks leaves idempotence unset (librdkafka refuses idempotence without acks=all),
    # with both warnings, and the client accepts the result.
    with pytest.warns(RuntimeWarning) as record:
        weak = producer_config({"bootstrap.servers": "b:1", "acks": 1})
    assert "enable.idempotence" not in weak
    messages = [str(w.message) for w in record]
    assert any("acks=1" in m for m in messages) and any("idempotence is off" in m for m in messages)
    Producer(weak)


def test_unknown_partition_count_leaves_the_record_to_the_client_and_counts_it() -> None:
    router = Router({"bootstrap.servers": "127.0.0.1:1"})
    assert router.partition("t", b"k") is None
    assert router.counters()["t"].unplaced == 1
    router._set_partition_count("t", 5)
    assert router.partition("t", b"k") == dkg_kafka.kafka_partition(b"k", 5)
    assert dict(router.counters()["t"].routes())["fallback"] == 2


def test_assignment_swaps_under_concurrent_lookups_are_consistent() -> None:
    """Threads place keys while another thread adopts epochs alternating between two tables and
    retractions: every partition must be the one of the assignment in force at some point (never a
    mix, never out of range), and every record is counted once."""
    router = Router({"bootstrap.servers": "127.0.0.1:1"})
    router._set_partition_count("t", 6)
    docs = [rotated("t", 6, epoch, shift=epoch % 2) for epoch in range(1, 400)]
    shapes = [Assignment.from_json(docs[0]), Assignment.from_json(docs[1])]
    keys = [f"key-{i}".encode() for i in range(500)] + [b"hot"]
    allowed = {
        k: {shapes[0].partition_for(k), shapes[1].partition_for(k), dkg_kafka.kafka_partition(k, 6)}
        for k in keys
    }
    stop = threading.Event()
    bad: list[tuple[bytes, int | None]] = []
    done = [0] * 4

    def produce(i: int) -> None:
        n = 0
        while not stop.is_set():
            for k in keys:
                p = router.partition("t", k)
                if p not in allowed[k]:
                    bad.append((k, p))
            n += len(keys)
        done[i] = n

    threads = [threading.Thread(target=produce, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for epoch, doc in enumerate(docs, start=1):
        assert router._apply(b"t", doc).outcome == "accepted"
        if epoch % 50 == 0:
            assert router._apply(b"t", None).outcome == "retracted"
    stop.set()
    for t in threads:
        t.join()
    assert bad == []
    assert sum(done) > 0
    counters = router.counters()["t"]
    assert sum(n for _, n in counters.routes()) == sum(done)
    assert sum(counters.per_partition()) == sum(done)
    placement = router.placement("t")
    assert placement is not None and placement.assignment is not None
    assert placement.assignment.epoch == len(docs)


def test_a_topic_that_disappears_has_no_partition_count_until_it_is_back() -> None:
    router = Router({"bootstrap.servers": "127.0.0.1:1"})
    router._set_partition_count("t", 3)
    assert router.partition("t", b"k") == dkg_kafka.kafka_partition(b"k", 3)
    router._set_partition_count("t", None)
    assert router.placement("t") is None
    assert router.partition("t", b"k") is None
    router._set_partition_count("t", 4)
    assert router.partition("t", b"k") == dkg_kafka.kafka_partition(b"k", 4)


def test_epoch_header_predecessors_follow_the_control_topic() -> None:
    """At start-up the first assignment has no known predecessor (nothing moved); live, the
    predecessor is the previous assignment, or Kafka's placement after a retraction (with
    ``epoch_header="moved"``; the default stamps nothing, see the last check)."""
    router = Router({"bootstrap.servers": "127.0.0.1:1"}, epoch_header="moved")
    router._set_partition_count("t", 4)
    keys = [f"key-{i}".encode() for i in range(300)]
    docs = [rotated("t", 4, epoch, shift=epoch) for epoch in range(1, 5)]
    a = [Assignment.from_json(d) for d in docs]

    def headers() -> list[bytes | None]:
        return [router.route("t", k)[1] for k in keys]

    router._apply(b"t", docs[0])  # read during the start-up catch-up
    assert headers() == [None] * len(keys)
    router._live = True
    router._apply(b"t", docs[1])
    assert headers() == [
        b"2" if a[1].partition_for(k) != a[0].partition_for(k) else None for k in keys
    ]
    router._apply(b"t", None)
    assert headers() == [None] * len(keys)  # Kafka's placement: no header
    router._apply(b"t", docs[2])
    assert headers() == [
        b"3" if a[2].partition_for(k) != dkg_kafka.kafka_partition(k, 4) else None for k in keys
    ]
    assert any(headers()) and not all(headers())
    with pytest.raises(ValueError, match="epoch_header"):
        Router({}, epoch_header="sometimes")
    # The default ("auto": this package takes no part in ordering) stamps no record.
    plain = Router({"bootstrap.servers": "127.0.0.1:1"})
    plain._set_partition_count("t", 4)
    plain._apply(b"t", docs[0])
    plain._live = True
    plain._apply(b"t", docs[1])
    assert [plain.route("t", k)[1] for k in keys] == [None] * len(keys)


class _RecordingConsumer:
    """Stands in for the control topic's consumer: records what the router assigns."""

    def __init__(self) -> None:
        self.assigned: list[list[tuple[str, int, int]]] = []

    def assign(self, partitions: list[TopicPartition]) -> None:
        self.assigned.append([(p.topic, p.partition, p.offset) for p in partitions])


def test_a_document_of_another_generation_rewinds_the_reader_and_the_new_one_is_adopted() -> None:
    """Spec 6.4 G5: the reader resumed in the middle of a recreated control topic. It seeks back
    to the beginning and adopts the new generation's documents (not generation_mismatch)."""
    router = Router({"bootstrap.servers": "127.0.0.1:1"}, control_topic="ctl")
    router._set_partition_count("t", 4)
    consumer = _RecordingConsumer()
    old, new = "a" * 32, "b" * 32
    assert not router._handle(consumer, b"@generation", generation_record(old))  # type: ignore[arg-type]
    assert not router._handle(consumer, b"t", v2_document(rotated("t", 4, 7, shift=1), old))  # type: ignore[arg-type]
    assert consumer.assigned == []
    # Mid-log of the new incarnation: a document of a generation not in force.
    assert router._handle(consumer, b"t", v2_document(rotated("t", 4, 2, shift=2), new))  # type: ignore[arg-type]
    assert consumer.assigned == [[("ctl", 0, OFFSET_BEGINNING)]]
    assert router.assignment("t") is None  # Kafka's placement until re-adopted
    # The records from the beginning of the new incarnation.
    assert not router._handle(consumer, b"@generation", generation_record(new))  # type: ignore[arg-type]
    assert not router._handle(consumer, b"t", v2_document(rotated("t", 4, 1, shift=3), new))  # type: ignore[arg-type]
    assert not router._handle(consumer, b"t", v2_document(rotated("t", 4, 2, shift=2), new))  # type: ignore[arg-type]
    adopted = router.assignment("t")
    assert adopted is not None and adopted.epoch == 2
    assert router.rejected()["generation_mismatch"] == 0
    assert consumer.assigned == [[("ctl", 0, OFFSET_BEGINNING)]], "one re-read"


def test_records_rejected_at_start_up_are_summarised_per_topic(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Old rejected records read at start-up give one warning per topic, not one per record;
    live rejections are still logged one by one (issue 31)."""
    router = Router({"bootstrap.servers": "127.0.0.1:1"})
    with caplog.at_level("WARNING", logger="dkg_kafka"):
        for key, value in [(b"t", b"not json"), (b"t", b"[]"), (b"u", b"{}"), (b"t", b"null")]:
            router._apply(key, value)
        assert not caplog.records, "nothing logged record by record at start-up"
        router._live = True
        router._log_startup_rejects()
        lines = [r.getMessage() for r in caplog.records]
        assert len(lines) == 2, lines
        assert "3 control-topic records for topic 't'" in lines[0]
        assert "malformed_json: 3" in lines[0]
        caplog.clear()
        router._apply(b"t", b"not json")
        assert len(caplog.records) == 1
    assert router.rejected()["malformed_json"] == 5
