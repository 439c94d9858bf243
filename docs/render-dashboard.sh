#!/usr/bin/env bash
# docs/render-dashboard.sh: regenerates docs/dashboard.png, the dashboard's key queries on a live stack,
# rendered by Prometheus' own graph page in headless Chromium (no Docker, no Grafana needed).
#
#   docs/render-dashboard.sh [seconds-of-workload (default 180)]
#
# Needs: the local broker (scripts/kafka), Debian's prometheus and chromium (apt-get install prometheus
# chromium), and a release build (cargo build --release -p dkg-sampler -p dkg-lab). Runs the compose stack's workload
# (Zipf 1.0 over 100k keys, 12 partitions, hash and DKG twins) against the local broker on fresh topics.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SECS=${1:-180}
BIN=${DKG_SAMPLER_BIN:-$ROOT/target/release/dkg-sampler}
LAB=${DKG_LAB_BIN:-$ROOT/target/release/dkg-lab}
OUT=${DKG_DASHBOARD_PNG:-$ROOT/docs/dashboard.png}
[[ -x "$BIN" && -x "$LAB" ]] || { echo "build first: cargo build --release -p dkg-sampler -p dkg-lab" >&2; exit 1; }
command -v prometheus >/dev/null || { echo "apt-get install prometheus" >&2; exit 1; }
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
[[ -n "$CHROMIUM" ]] || { echo "apt-get install chromium" >&2; exit 1; }

BS=$(bash "$ROOT/scripts/kafka" start | tail -n1)
WORK=$(mktemp -d)
RUN=$(date +%s)
HASH=docs-orders-hash-$RUN
DKG=docs-orders-dkg-$RUN
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
P_SAMPLER=$(free_port) P_SAMPLER_HASH=$(free_port) P_LG_DKG=$(free_port) P_LG_HASH=$(free_port) P_PROM=$(free_port)

PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  bash "$ROOT/scripts/kafka" topics --delete --topic "$HASH" >/dev/null 2>&1 || true
  bash "$ROOT/scripts/kafka" topics --delete --topic "$DKG" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

LOAD=(--alpha 1.0 --keys 100000 --count 1000000000 --rate 2000 --create-partitions 12)
"$LAB" loadgen --bootstrap-servers "$BS" --topic "$HASH" "${LOAD[@]}" --plain --metrics-addr "127.0.0.1:$P_LG_HASH" >"$WORK/lg-hash.log" 2>&1 &
PIDS+=($!)
"$LAB" loadgen --bootstrap-servers "$BS" --topic "$DKG" "${LOAD[@]}" --metrics-addr "127.0.0.1:$P_LG_DKG" >"$WORK/lg-dkg.log" 2>&1 &
PIDS+=($!)
sleep 3
"$BIN" run --bootstrap-servers "$BS" --topic "$DKG" --interval-secs 10 --metrics-addr "127.0.0.1:$P_SAMPLER" >"$WORK/sampler.log" 2>&1 &
PIDS+=($!)
"$BIN" run --bootstrap-servers "$BS" --topic "$HASH" --interval-secs 10 --dry-run --metrics-addr "127.0.0.1:$P_SAMPLER_HASH" >"$WORK/sampler-hash.log" 2>&1 &
PIDS+=($!)

# The repo's Prometheus config, targets pointed at the local processes.
sed -e "s/sampler:9100/127.0.0.1:$P_SAMPLER/" -e "s/sampler-hash:9100/127.0.0.1:$P_SAMPLER_HASH/" \
  -e "s/loadgen-dkg:9100/127.0.0.1:$P_LG_DKG/" -e "s/loadgen-hash:9100/127.0.0.1:$P_LG_HASH/" \
  -e "s/localhost:9090/127.0.0.1:$P_PROM/" "$ROOT/deploy/prometheus/prometheus.yml" >"$WORK/prometheus.yml"
prometheus --config.file="$WORK/prometheus.yml" --storage.tsdb.path="$WORK/tsdb" \
  --web.listen-address="127.0.0.1:$P_PROM" --log.level=warn >"$WORK/prometheus.log" 2>&1 &
PIDS+=($!)

echo "render-dashboard: workload running for $SECS s (hash: $HASH, DKG: $DKG)" >&2
sleep "$SECS"

enc() { python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$1"; }
R=$(( (SECS + 59) / 60 ))m
Q0="max by (topic) (dkg_sampler_observed_imbalance_ratio{topic=~\"$HASH|$DKG\"})"
Q1="max by (partition) (dkg_sampler_partition_records_per_second{topic=\"$HASH\"})"
Q2="max by (partition) (dkg_sampler_partition_records_per_second{topic=\"$DKG\"})"
URL="http://127.0.0.1:$P_PROM/graph?g0.expr=$(enc "$Q0")&g0.tab=0&g0.range_input=$R&g1.expr=$(enc "$Q1")&g1.tab=0&g1.range_input=$R&g2.expr=$(enc "$Q2")&g2.tab=0&g2.range_input=$R"
"$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-background-networking --disable-component-update \
  --no-first-run --hide-scrollbars --user-data-dir="$WORK/chromium" --window-size=1400,2480 \
  --virtual-time-budget=15000 --screenshot="$OUT" "$URL" >/dev/null 2>&1
echo "render-dashboard: wrote $OUT" >&2
