"""Client configurations derived from the user's producer configuration.

Like the Rust producer (``partitioner/src/kafka/control.rs``, ``connection_config``), with the same list
(``crates/dkg-protocol/src/connection.rs``, through the extension's ``is_connection_setting``): the control
topic's consumer gets the connection-level settings only (bootstrap, security, sockets, client id), so
the same dict that configures the producer also reaches the control topic; producer-specific settings
(``acks``, ``linger.ms``...) would be rejected or warned about by a consumer.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Mapping
from typing import Any

from ._native import is_connection_setting

_log = logging.getLogger("dkg_kafka")

# confluent-kafka's Python-level hooks that authenticate or log the connection; every other key is
# classified by the extension, which shares the one list with the Rust glue.
_PYTHON_HOOKS = frozenset({"oauth_cb", "logger"})


def connection_config(conf: Mapping[str, Any]) -> dict[str, Any]:
    """The connection-level settings of ``conf``, with ``client.id`` suffixed ``-dkg-control``."""
    out = {k: v for k, v in conf.items() if k in _PYTHON_HOOKS or is_connection_setting(k)}
    client_id = conf.get("client.id")
    out["client.id"] = f"{client_id}-dkg-control" if client_id else "dkg-control"
    return out


def control_consumer_config(conf: Mapping[str, Any]) -> dict[str, Any]:
    """The control topic reader's consumer: no group membership, no commits, short fetch waits.

    It assigns partition 0 itself and never joins or commits; ``group.id`` is only set because
    librdkafka's consumer needs one. ``fetch.wait.max.ms=100`` bounds the adoption latency.
    """
    out = connection_config(conf)
    out.update(
        {
            "group.id": conf.get("group.id", "dkg-control-reader"),
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": False,
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 100,
            "isolation.level": "read_committed",
            "allow.auto.create.topics": False,
        }
    )
    return out


def _is_true(value: Any) -> bool:
    return str(value).strip().lower() in {"true", "1", "yes"}


def producer_config(conf: Mapping[str, Any]) -> dict[str, Any]:
    """The user's producer configuration with the wrapper's defaults where it sets nothing.

    - ``acks=all`` and ``enable.idempotence=true`` (a warning when either is off: an assignment
      change is only safe for ordering when retries cannot reorder records; with another ``acks``
      idempotence stays off unless set, since librdkafka refuses that pair);
    - ``partitioner=murmur2_random``: Kafka's (Java's) placement for the keyed records the wrapper
      leaves to the client (before a topic's partition count is known); librdkafka's own default
      is CRC32 (``consistent_random``), which would put those keys elsewhere.
    """
    out = dict(conf)
    out.setdefault("acks", "all")
    acks_all = str(out["acks"]).strip().lower() in {"all", "-1"}
    if not acks_all:
        _warn(f"acks={out['acks']!r}: records acknowledged by the leader alone can be lost")
    # Idempotence requires acks=all (librdkafka refuses the pair otherwise): with a weaker acks it
    # stays off unless the user asks for it, as in the Rust producer.
    if "enable.idempotence" not in out and acks_all:
        out["enable.idempotence"] = True
    if not _is_true(out.get("enable.idempotence", False)):
        _warn("enable.idempotence is off: retries may reorder or duplicate a key's records")
    out.setdefault("partitioner", "murmur2_random")
    if out["partitioner"] not in {"murmur2_random", "murmur2"}:
        _warn(
            f"partitioner={out['partitioner']!r}: keyed records produced before a topic's "
            "partition count is known will not land where Kafka's (Java's) default puts them"
        )
    return out


def _warn(message: str) -> None:
    _log.warning("DkgProducer: %s", message)
    warnings.warn(f"DkgProducer: {message}", RuntimeWarning, stacklevel=4)
