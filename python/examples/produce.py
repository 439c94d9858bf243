"""Produce keyed records through DkgProducer and print where they went.

    python examples/produce.py [--bootstrap 127.0.0.1:9092] [--topic orders] [--records 20]
                               [--control-topic _dkg.assignments]

Runs against any broker: without a DKG assignment for the topic (none has been published by
``dkg-sampler`` yet) every key goes where Kafka's Java producer puts it; once one is published on
the control topic, the producer follows it within about a second, with no restart.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from dkg_kafka import DEFAULT_CONTROL_TOPIC, DkgProducer, kafka_partition


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--bootstrap", default=os.environ.get("DKG_TEST_BOOTSTRAP", "127.0.0.1:9092")
    )
    parser.add_argument("--topic", default="dkg-example-orders")
    parser.add_argument("--records", type=int, default=20)
    parser.add_argument("--control-topic", default=DEFAULT_CONTROL_TOPIC)
    args = parser.parse_args()

    conf = {"bootstrap.servers": args.bootstrap}
    admin = AdminClient(conf)
    if args.topic not in admin.list_topics(timeout=10).topics:
        admin.create_topics([NewTopic(args.topic, num_partitions=6, replication_factor=1)])[
            args.topic
        ].result(timeout=30)

    # The one-line change: confluent_kafka.Producer(conf) -> DkgProducer(conf).
    producer = DkgProducer(conf, control_topic=args.control_topic)
    placed: list[tuple[bytes, int]] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            print(f"delivery failed: {err}")
        else:
            placed.append((msg.key(), msg.partition()))

    # produce() never waits for the router: the first records of a topic new to it go to the
    # client's murmur2 partitioner (Kafka's placement too) until its partition count is known.
    for i in range(args.records):
        key = f"customer-{i % 7}"
        producer.produce(args.topic, value=f"order {i}", key=key, on_delivery=on_delivery)
    producer.close()

    assignment = producer.router.assignment(args.topic)
    print(f"topic {args.topic}: assignment epoch {assignment.epoch if assignment else None}")
    n = len(admin.list_topics(args.topic, timeout=10).topics[args.topic].partitions)
    for placed_key, partition in placed:
        kafka = kafka_partition(placed_key, n)
        note = "" if partition == kafka else f" (Kafka's default: {kafka})"
        print(f"  {placed_key.decode():12} -> partition {partition}{note}")


if __name__ == "__main__":
    main()
