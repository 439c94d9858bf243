#!/usr/bin/env python3
"""Queueing model of the end-to-end benchmark's target (b): what p99 ratio DKG/hash a group can reach.

BENCHMARKS.md, "End to end", "What (b) can reach". Each member is one FIFO server (the e2e members process
their partition's records one at a time at a fixed cost), fed by its partition's share of a Poisson stream.
This script takes the per-partition shares of a run's JSON (`dkg-lab e2e`, `hash.per_partition` and
`dkg.per_partition`), offers both groups the run's (b) rate (70% of the hash group's capacity) and computes
each record's sojourn (wait + service) with Lindley's recursion, exactly, for deterministic and for
exponential service times. It prints the p99 over all records (what the target compares), the worst
partition's p99, and both ratios with a fixed pipeline latency added to every record.

    python3 docs/e2e/queue_model.py docs/e2e/e2e-zipf1-p12-c50-poisson-step30.json

Standard library only; seeded, so the numbers repeat.
"""

from __future__ import annotations

import json
import random
import sys
from typing import Dict, List, Sequence, Tuple

SECONDS = 600.0
REPEATS = 5
PIPELINES_MS = (0.0, 7.0, 14.0)


def shares(per_partition: Sequence[int]) -> List[float]:
    total = float(sum(per_partition))
    return [c / total for c in per_partition]


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest rank, as the benchmark's `Latency` does."""
    i = max(1, min(len(sorted_values), int(-(-q * len(sorted_values) // 1)))) - 1
    return sorted_values[i]


def simulate(
    rng: random.Random, group_shares: Sequence[float], rate: float, service_s: float, exponential: bool
) -> Tuple[float, float]:
    """(p99 over all records, highest per-partition p99) of one run, in seconds."""
    everything: List[float] = []
    worst = 0.0
    for share in group_shares:
        lam = rate * share
        t_arrival = 0.0
        t_free = 0.0
        sojourns: List[float] = []
        while True:
            t_arrival += rng.expovariate(lam)
            if t_arrival > SECONDS:
                break
            service = rng.expovariate(1.0 / service_s) if exponential else service_s
            t_free = max(t_free, t_arrival) + service
            sojourns.append(t_free - t_arrival)
        sojourns.sort()
        if len(sojourns) >= 200:
            worst = max(worst, percentile(sojourns, 0.99))
        everything.extend(sojourns)
    everything.sort()
    return percentile(everything, 0.99), worst


def median(values: Sequence[float]) -> float:
    v = sorted(values)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def main(path: str) -> None:
    with open(path, encoding="utf-8") as f:
        run: Dict[str, object] = json.load(f)
    hash_side = run["hash"]
    dkg_side = run["dkg"]
    assert isinstance(hash_side, dict) and isinstance(dkg_side, dict)
    capacity = float(run["member_capacity_rps"])  # type: ignore[arg-type]
    rate = float(run["at_70pct_hash_rps"])  # type: ignore[arg-type]
    service_s = 1.0 / capacity
    hash_shares = shares(hash_side["per_partition"])
    dkg_shares = shares(dkg_side["per_partition"])
    print(
        f"{path}: {len(hash_shares)} partitions, service {service_s * 1e3:.1f} ms, (b) rate {rate:.0f} rec/s; "
        f"largest share hash {max(hash_shares):.3f} (busiest member {rate * max(hash_shares) / capacity:.0%} busy), "
        f"DKG {max(dkg_shares):.3f} ({rate * max(dkg_shares) / capacity:.0%})"
    )
    for exponential in (False, True):
        rng = random.Random(7)
        runs = [
            (simulate(rng, hash_shares, rate, service_s, exponential), simulate(rng, dkg_shares, rate, service_s, exponential))
            for _ in range(REPEATS)
        ]
        h_all = median([h[0] for h, _ in runs])
        d_all = median([d[0] for _, d in runs])
        h_worst = median([h[1] for h, _ in runs])
        d_worst = median([d[1] for _, d in runs])
        kind = "exponential" if exponential else "deterministic"
        print(
            f"{kind:>13} service: p99 all hash {h_all * 1e3:.0f} ms, DKG {d_all * 1e3:.0f} ms; "
            f"worst partition hash {h_worst * 1e3:.0f} ms, DKG {d_worst * 1e3:.0f} ms"
        )
        for pipe_ms in PIPELINES_MS:
            p = pipe_ms / 1e3
            print(
                f"{'':>13}  + pipeline {pipe_ms:4.0f} ms: p99 ratio all {(d_all + p) / (h_all + p):.2f}, "
                f"worst partition {(d_worst + p) / (h_worst + p):.2f}"
            )


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: queue_model.py <e2e result JSON>")
    main(sys.argv[1])
