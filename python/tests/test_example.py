"""The README's runnable example (``examples/produce.py``), run as a user runs it, on the broker."""

from __future__ import annotations

import re
import subprocess
import sys

from confluent_kafka.admin import AdminClient

from dkg_kafka import Assignment, kafka_partition

from .conftest import _CREATED, REPO_ROOT, Publisher, create_topic, document, unique

EXAMPLE = REPO_ROOT / "python" / "examples" / "produce.py"
LINE = re.compile(r"^  (\S+)\s+-> partition (\d+)(?: \(Kafka's default: (\d+)\))?$")


def run_example(bootstrap: str, topic: str, control_topic: str, records: int) -> list[str]:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "--bootstrap", bootstrap, "--topic", topic,
         "--control-topic", control_topic, "--records", str(records)],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, f"example failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    return done.stdout.splitlines()


def placements(lines: list[str]) -> list[tuple[bytes, int, int | None]]:
    """(key, partition, Kafka's default if it differs) of each "key -> partition" line."""
    out: list[tuple[bytes, int, int | None]] = []
    for line in lines[1:]:
        m = LINE.match(line)
        assert m is not None, f"unexpected line {line!r}"
        out.append((m[1].encode(), int(m[2]), None if m[3] is None else int(m[3])))
    return out


def test_the_example_follows_a_published_assignment(
    bootstrap: str, admin: AdminClient, control_topic: str, publisher: Publisher
) -> None:
    topic = create_topic(admin, unique("dkg-test-example"), 6)
    # Every bucket on partition 4, and one heavy key of the example's on partition 1.
    doc = document(topic, 6, epoch=7, table=[4] * 64, heavy=[(b"customer-3", 1)])
    publisher.publish(doc)
    a = Assignment.from_json(doc)
    lines = run_example(bootstrap, topic, control_topic, 21)
    assert lines[0] == f"topic {topic}: assignment epoch 7", lines
    got = placements(lines)
    assert len(got) == 21, lines
    assert {key for key, _, _ in got} == {f"customer-{i}".encode() for i in range(7)}
    for key, partition, noted in got:
        assert partition == a.partition_for(key) == (1 if key == b"customer-3" else 4), (key, lines)
        kafka = kafka_partition(key, 6)
        assert noted == (None if kafka == partition else kafka), (key, lines)


def test_the_example_places_by_kafkas_default_without_an_assignment(
    bootstrap: str, admin: AdminClient, control_topic: str
) -> None:
    topic = unique("dkg-test-example")  # the example creates it (6 partitions)
    _CREATED.append(topic)  # deleted with the session's other topics
    lines = run_example(bootstrap, topic, control_topic, 14)
    assert lines[0] == f"topic {topic}: assignment epoch None", lines
    got = placements(lines)
    assert len(got) == 14, lines
    for key, partition, noted in got:
        assert (partition, noted) == (kafka_partition(key, 6), None), (key, lines)
