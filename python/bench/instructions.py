"""Per-record instruction counts of ``produce()``, for callgrind (load-independent, unlike time).

    valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file=cg.%p \\
        python bench/instructions.py {plain|dkg} RECORDS [--keywords]

produces RECORDS keyed records (the throughput bench's keys: one in five of eight hot keys) into
a client that never connects (records stay queued), through a plain ``confluent_kafka.Producer``
or through ``ProducerCore.produce`` bound to one (an assignment in effect, the ``moved`` header
rule with no predecessor: no headers, as in the throughput bench). The producing thread is the
main one (``cg.<pid>-01``); the difference of two runs (e.g. 10,000 and 60,000 records) divided
by the difference of the counts is the cost of one record, start-up excluded. ``--keywords``
passes ``on_delivery=`` as a keyword (the general path). No broker needed.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import Any

from confluent_kafka import Producer

from dkg_kafka import Assignment, Placement, RouteCounters
from dkg_kafka._native import PlacementTable, ProducerCore

from bench import document


def main() -> None:
    parser = argparse.ArgumentParser(description="produce() records for callgrind")
    parser.add_argument("contender", choices=["plain", "dkg"])
    parser.add_argument("records", type=int)
    parser.add_argument("--keywords", action="store_true", help="pass on_delivery= as a keyword")
    args = parser.parse_args()
    topic, partitions = "bench", 12
    heavy = [f"hot-{i}".encode() for i in range(8)]
    records = [
        (heavy[i % 8] if i % 5 == 0 else f"user-{(i * 7919) % 100_000}".encode(), b"x" * 64)
        for i in range(args.records)
    ]
    client = Producer({
        "bootstrap.servers": "127.0.0.1:1", "message.timeout.ms": 600_000, "log_level": 0,
        "queue.buffering.max.messages": 2_000_000, "queue.buffering.max.kbytes": 2_000_000,
        "enable.idempotence": True, "acks": "all", "partitioner": "murmur2_random",
    })
    produce: Callable[..., Any] = client.produce
    if args.contender == "dkg":
        table = PlacementTable()
        assignment = Assignment.from_json(document(topic, partitions, 1, heavy))
        table[topic] = Placement(partitions, assignment, RouteCounters(), epoch_header="moved")
        core = ProducerCore()
        core.bind(client.produce, table, lambda _topic: None)
        produce = core.produce
    run(produce, topic, records, args.keywords)
    os._exit(0)  # skip the client's teardown (its queued records): not part of the count


def run(produce: Callable[..., Any], topic: str, records: list[tuple[bytes, bytes]],
        keywords: bool) -> None:
    if keywords:
        def delivered(err: Any, msg: Any) -> None: ...

        for key, value in records:
            produce(topic, value, key, on_delivery=delivered)
    else:
        for key, value in records:
            produce(topic, value, key)


if __name__ == "__main__":
    main()
