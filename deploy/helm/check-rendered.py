"""Checks `helm template` output of the dkg-sampler chart (stdin) rendered by scripts/packaging lint with
topics={orders,payments}, serviceMonitor.enabled=true, kafka.existingSecret=kafka-creds: one Deployment, Service
and ServiceMonitor per topic, probes on /healthz, the metrics port, the Kafka secrets from the Secret only."""

import sys

import yaml

docs = [d for d in yaml.safe_load_all(sys.stdin.read()) if d]
by_kind: dict[str, list[dict]] = {}
for d in docs:
    by_kind.setdefault(d["kind"], []).append(d)


def fail(msg: str) -> None:
    sys.exit(f"deploy/helm/check-rendered.py: {msg}")


topics = ["orders", "payments"]
for kind in ("Deployment", "Service", "ServiceMonitor"):
    if len(by_kind.get(kind, [])) != len(topics):
        fail(f"{len(by_kind.get(kind, []))} {kind}s for {len(topics)} topics")

services = {s["metadata"]["name"]: s for s in by_kind["Service"]}
seen = []
for dep in by_kind["Deployment"]:
    name = dep["metadata"]["name"]
    spec = dep["spec"]["template"]["spec"]
    (c,) = spec["containers"]
    env = {e["name"]: e.get("value") for e in c["env"]}
    seen.append(env["DKG_TOPIC"])
    if env["DKG_BOOTSTRAP_SERVERS"] != "kafka:9092":
        fail(f"{name}: bootstrap servers {env['DKG_BOOTSTRAP_SERVERS']}")
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    if ports != {"metrics": 9100} or env["DKG_METRICS_ADDR"] != "0.0.0.0:9100":
        fail(f"{name}: metrics port {ports}, {env['DKG_METRICS_ADDR']}")
    for probe in ("readinessProbe", "livenessProbe"):
        get = c[probe]["httpGet"]
        if get["path"] != "/healthz" or get["port"] != "metrics":
            fail(f"{name}: {probe} {get}")
    # Secrets: only through the mounted Secret, never as a value in the pod spec.
    if env.get("DKG_KAFKA_CONFIG_FILE") != "/etc/dkg/kafka/kafka.properties":
        fail(f"{name}: DKG_KAFKA_CONFIG_FILE {env.get('DKG_KAFKA_CONFIG_FILE')}")
    (vol,) = spec["volumes"]
    if vol["secret"]["secretName"] != "kafka-creds":
        fail(f"{name}: volume {vol}")
    mounts = {m["name"]: m for m in c["volumeMounts"]}
    if not mounts["kafka-secret"].get("readOnly"):
        fail(f"{name}: the secret is mounted writable")
    if any("password" in str(v).lower() for v in env.values()):
        fail(f"{name}: a password in the environment")
    if not spec["securityContext"].get("runAsNonRoot"):
        fail(f"{name}: may run as root")
    if dep["spec"]["replicas"] != 1:
        fail(f"{name}: more than one publisher per topic")
    svc = services.get(name)
    if svc is None:
        fail(f"{name}: no Service")
    selector = svc["spec"]["selector"]
    labels = dep["spec"]["template"]["metadata"]["labels"]
    if any(labels.get(k) != v for k, v in selector.items()):
        fail(f"{name}: the Service selector {selector} does not select the pods {labels}")
if sorted(seen) != topics:
    fail(f"topics {seen}")
for sm in by_kind["ServiceMonitor"]:
    svc = services[sm["metadata"]["name"]]
    if any(svc["metadata"]["labels"].get(k) != v for k, v in sm["spec"]["selector"]["matchLabels"].items()):
        fail(f"{sm['metadata']['name']}: the ServiceMonitor selects no Service")
    if sm["spec"]["endpoints"][0]["port"] != "metrics":
        fail(f"{sm['metadata']['name']}: endpoint {sm['spec']['endpoints']}")
print(f"helm template: {len(docs)} objects for topics {topics} checked", file=sys.stderr)
