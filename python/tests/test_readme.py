"""The root README's Python snippet (its five-minute path), run as written on the broker.

Only the broker address, the topic and the control topic are substituted (the test's own), so the
front door cannot drift from the API: a renamed class, argument or method fails here.
"""

from __future__ import annotations

import re
import subprocess
import sys
import uuid

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from dkg_kafka import kafka_partition

from .conftest import REPO_ROOT, Publisher, create_topic, document, unique

BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)
CONF = '{"bootstrap.servers": "127.0.0.1:9092"}'


def readme_snippet() -> str:
    found = BLOCK.search((REPO_ROOT / "README.md").read_text(encoding="utf-8"))
    assert found is not None, "README.md has no ```python block"
    return found.group(1)


def test_the_readme_snippet_runs_and_places_its_record(
    bootstrap: str, admin: AdminClient, control_topic: str, publisher: Publisher
) -> None:
    snippet = readme_snippet()
    assert CONF in snippet and '"orders"' in snippet, f"the snippet changed shape:\n{snippet}"
    topic = create_topic(admin, unique("dkg-test-readme"), 6)
    # The snippet's key heavy on a partition other than Kafka's own placement of it.
    default = kafka_partition(b"customer-42", 6)
    heavy = (default + 1) % 6
    publisher.publish(document(topic, 6, epoch=3, table=[(default + 2) % 6] * 64,
                               heavy=[(b"customer-42", heavy)]))
    ours = f'{{"bootstrap.servers": "{bootstrap}"}}, control_topic="{control_topic}"'
    code = snippet.replace(CONF, ours)
    code = code.replace('"orders"', f'"{topic}"')
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, f"snippet failed ({done.returncode}):\n{code}\n{done.stderr}"

    group = f"dkg-test-readme-{uuid.uuid4().hex}"
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        ends = [
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in range(6)
        ]
    finally:
        consumer.close()
    counts = [high - low for low, high in ends]
    assert sum(counts) == 1, counts
    # Its first record may precede the router's partition count for the topic (then Kafka's
    # placement, python/README.md); either way it is where the spec puts it.
    assert counts[heavy] == 1 or counts[default] == 1, (counts, heavy, default)
