//! The docker-compose stack, checked without a Docker engine: services, pinned images, ports,
//! healthchecks and start order, that every mounted file exists in the repo, that Grafana's provisioning
//! paths match the mounts, that Prometheus scrapes every service that serves metrics on the right port,
//! that the dashboards reference the provisioned datasource, that the samplers run the product image
//! (dkg-sampler) and the load generators and consumers the lab image (dkg-lab), and that every command
//! line of those images in the stack is accepted by the binary built from this checkout.
#![allow(clippy::unwrap_used)]

mod dashboards_common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use dashboards_common::{
    DATASOURCE_VARIABLE_UID, GRAFANA_BUILTIN_UID, dashboards, datasource_uids,
    prometheus_datasource_variable, provisioned_datasources, read, read_yaml, repo_root,
};
use serde_yaml_ng::Value as Yaml;

const SERVICES: &[&str] = &[
    "kafka",
    "init",
    "sampler",
    "sampler-hash",
    "loadgen-dkg",
    "loadgen-hash",
    "consumer-dkg",
    "consumer-hash",
    "prometheus",
    "grafana",
];

struct Compose {
    doc: Yaml,
}

impl Compose {
    fn load() -> Self {
        Self {
            doc: read_yaml(&repo_root().join("docker-compose.yml")),
        }
    }

    fn services(&self) -> BTreeMap<String, &Yaml> {
        self.doc["services"]
            .as_mapping()
            .expect("docker-compose.yml has a services mapping")
            .iter()
            .map(|(k, v)| (k.as_str().expect("service name").to_string(), v))
            .collect()
    }

    fn service(&self, name: &str) -> &Yaml {
        let s = &self.doc["services"][name];
        assert!(
            s.is_mapping(),
            "service {name} missing from docker-compose.yml"
        );
        s
    }
}

fn strings(v: &Yaml) -> Vec<String> {
    match v {
        Yaml::Sequence(items) => items
            .iter()
            .map(|i| match i {
                Yaml::String(s) => s.clone(),
                Yaml::Number(n) => n.to_string(),
                other => panic!("expected a string, got {other:?}"),
            })
            .collect(),
        Yaml::String(s) => s.split_whitespace().map(str::to_string).collect(),
        Yaml::Null => Vec::new(),
        other => panic!("expected a list of strings, got {other:?}"),
    }
}

/// `--flag=value` / `--flag value` / `--flag` arguments of a command line (after the subcommand).
fn flags(args: &[String]) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        if let Some(rest) = a.strip_prefix("--") {
            if let Some((k, v)) = rest.split_once('=') {
                out.push((k.to_string(), Some(v.to_string())));
            } else if args.get(i + 1).is_some_and(|n| !n.starts_with("--")) {
                out.push((rest.to_string(), Some(args[i + 1].clone())));
                i += 1;
            } else {
                out.push((rest.to_string(), None));
            }
        }
        i += 1;
    }
    out
}

fn flag(flags: &[(String, Option<String>)], name: &str) -> Option<String> {
    flags
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.clone().unwrap_or_default())
}

fn port_of(addr: &str) -> u16 {
    addr.rsplit_once(':')
        .and_then(|(_, p)| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {addr:?}"))
}

/// `[ip:]host:container[/proto]` -> (host port, container port).
fn published(spec: &str) -> (u16, u16) {
    let spec = spec.split('/').next().unwrap();
    let parts: Vec<&str> = spec.split(':').collect();
    assert!(
        parts.len() >= 2,
        "port {spec:?}: publish as [ip:]host:container so the host port is fixed"
    );
    if parts.len() == 3 {
        assert_eq!(
            parts[0], "127.0.0.1",
            "port {spec:?}: publish on the loopback only"
        );
    }
    let n = parts.len();
    (
        parts[n - 2].parse().expect("host port"),
        parts[n - 1].parse().expect("container port"),
    )
}

fn image_tag(image: &str) -> &str {
    let (_, tag) = image
        .rsplit_once(':')
        .unwrap_or_else(|| panic!("image {image:?} has no tag: pin a version"));
    assert!(
        !tag.contains('/'),
        "image {image:?} has no tag: pin a version"
    );
    tag
}

/// The binary an image of the repo's Dockerfile runs (its ENTRYPOINT), or None for other images.
fn dkg_binary(image: &str) -> Option<&'static str> {
    ["dkg-sampler", "dkg-lab"]
        .into_iter()
        .find(|b| image.strip_prefix(b).is_some_and(|t| t.starts_with(':')))
}

/// The services of the repo's images (dkg-sampler, dkg-lab): those built from the repo's Dockerfile.
fn dkg_services(c: &Compose) -> Vec<(String, Vec<String>)> {
    c.services()
        .into_iter()
        .filter(|(_, s)| s["image"].as_str().and_then(dkg_binary).is_some())
        .map(|(name, s)| (name, strings(&s["command"])))
        .collect()
}

#[test]
fn compose_has_every_service_with_a_pinned_image() {
    let c = Compose::load();
    let services = c.services();
    for name in SERVICES {
        assert!(services.contains_key(*name), "service {name} missing");
    }
    for (name, s) in &services {
        let image = s["image"]
            .as_str()
            .unwrap_or_else(|| panic!("service {name}: no image"));
        let tag = image_tag(image);
        if s.get("build").is_some() {
            let build = &s["build"];
            let context = build["context"].as_str().or(build.as_str()).unwrap();
            let dockerfile = build["dockerfile"].as_str().unwrap_or("Dockerfile");
            let path = repo_root().join(context).join(dockerfile);
            assert!(path.is_file(), "service {name}: {} missing", path.display());
        } else {
            assert!(
                tag != "latest" && tag.chars().any(|c| c.is_ascii_digit()),
                "service {name}: image {image:?} is not pinned to a version"
            );
        }
    }
    // Every service built from the repo runs one of two images, each built once from one build
    // definition: the product (target `sampler`) for the samplers, the lab (target `lab`) for the rest.
    let built: BTreeSet<String> = services
        .values()
        .filter(|s| s.get("build").is_some())
        .map(|s| format!("{:?} {:?}", s["image"], s["build"]))
        .collect();
    assert_eq!(
        built.len(),
        2,
        "services built from the repo: one build per image expected: {built:?}"
    );
    for (name, s) in &services {
        let Some(binary) = s["image"].as_str().and_then(dkg_binary) else {
            continue;
        };
        let target = s["build"]["target"].as_str();
        let sub = strings(&s["command"])[0].clone();
        let expected = if sub == "run" {
            ("dkg-sampler", Some("sampler"))
        } else {
            ("dkg-lab", Some("lab"))
        };
        assert_eq!(
            (binary, target),
            expected,
            "service {name} ({sub}): the sidecar runs the product image, the tools the lab's"
        );
    }

    // The Dockerfile's base images are pinned too, and it builds the sampler in release.
    let dockerfile = read(&repo_root().join("Dockerfile"));
    // `FROM <image> [AS <stage>]`; a FROM naming an earlier stage builds on it, not on an image.
    let mut stages = BTreeSet::new();
    let mut froms: Vec<&str> = Vec::new();
    for l in dockerfile
        .lines()
        .filter_map(|l| l.trim().strip_prefix("FROM "))
    {
        let words: Vec<&str> = l.split_whitespace().collect();
        if !stages.contains(words[0]) {
            froms.push(words[0]);
        }
        if let [_, as_, stage] = words[..] {
            assert!(as_.eq_ignore_ascii_case("as"), "Dockerfile: FROM {l}");
            stages.insert(stage);
        }
    }
    assert!(
        froms.len() >= 2,
        "Dockerfile: expected a multi-stage build, got {froms:?}"
    );
    for f in &froms {
        let tag = image_tag(f);
        assert!(
            tag != "latest" && tag.chars().any(|c| c.is_ascii_digit()),
            "Dockerfile: base image {f:?} is not pinned"
        );
    }
    assert!(
        froms[0].starts_with("rust:"),
        "Dockerfile builds with the rust image"
    );
    assert!(
        dockerfile.contains("cargo build --release --locked -p dkg-sampler"),
        "Dockerfile builds dkg-sampler in release with the lock file"
    );
    // The product stage (the last, the default target) carries dkg-sampler alone.
    let product = dockerfile.rsplit("\nFROM ").next().expect("a last stage");
    assert!(
        product.starts_with("runtime AS sampler") && !product.contains("dkg-lab"),
        "the Dockerfile's last stage is the product image, without the lab:\n{product}"
    );

    // The broker image is the same Kafka release scripts/kafka runs in development and CI.
    let pom = read(&repo_root().join("scripts/kafka-pom.xml"));
    let version = pom
        .split("<kafka.version>")
        .nth(1)
        .and_then(|s| s.split("</kafka.version>").next())
        .expect("kafka.version in scripts/kafka-pom.xml");
    for svc in ["kafka", "init"] {
        assert_eq!(
            c.service(svc)["image"].as_str().unwrap(),
            format!("apache/kafka:{version}"),
            "service {svc}: pin apache/kafka to scripts/kafka-pom.xml's kafka.version"
        );
    }
}

#[test]
fn compose_start_order_and_healthchecks_are_consistent() {
    let c = Compose::load();
    let services = c.services();
    for (name, s) in &services {
        let one_shot = s["restart"].as_str() == Some("no");
        if !one_shot {
            assert!(
                strings(&s["healthcheck"]["test"]).len() >= 2,
                "long-running service {name} has no healthcheck"
            );
        }
        let Some(deps) = s["depends_on"].as_mapping() else {
            continue;
        };
        for (dep, cond) in deps {
            let dep = dep.as_str().unwrap();
            let target = services
                .get(dep)
                .unwrap_or_else(|| panic!("{name} depends on unknown service {dep}"));
            match cond["condition"].as_str() {
                Some("service_healthy") => assert!(
                    target.get("healthcheck").is_some(),
                    "{name} waits for {dep} to be healthy, but {dep} has no healthcheck"
                ),
                Some("service_completed_successfully") => assert_eq!(
                    target["restart"].as_str(),
                    Some("no"),
                    "{name} waits for {dep} to complete: {dep} must be a one-shot (restart: \"no\")"
                ),
                Some("service_started") => {}
                other => panic!("{name} -> {dep}: unknown condition {other:?}"),
            }
        }
    }
    // Topics exist before anything uses them; Kafka is healthy before they are created.
    assert_eq!(
        c.service("init")["depends_on"]["kafka"]["condition"].as_str(),
        Some("service_healthy")
    );
    for (name, _) in dkg_services(&c) {
        assert_eq!(
            c.service(&name)["depends_on"]["init"]["condition"].as_str(),
            Some("service_completed_successfully"),
            "{name} must wait for the topics"
        );
    }
    assert_eq!(
        c.service("grafana")["depends_on"]["prometheus"]["condition"].as_str(),
        Some("service_healthy")
    );
}

#[test]
fn compose_topics_and_workloads_are_twins() {
    let c = Compose::load();
    let init = strings(&c.service("init")["command"]).join(" ");
    let dkg = dkg_services(&c);
    let cmd = |name: &str| {
        dkg.iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("{name} is not a dkg-sampler or dkg-lab service"))
            .1
            .clone()
    };
    let sampler = flags(&cmd("sampler"));
    let sampler_hash = flags(&cmd("sampler-hash"));
    let lg_dkg = flags(&cmd("loadgen-dkg"));
    let lg_hash = flags(&cmd("loadgen-hash"));
    assert_eq!(cmd("sampler")[0], "run");
    assert_eq!(cmd("sampler-hash")[0], "run");
    assert_eq!(cmd("loadgen-dkg")[0], "loadgen");
    assert_eq!(cmd("loadgen-hash")[0], "loadgen");

    let dkg_topic = flag(&sampler, "topic").expect("sampler --topic");
    let hash_topic = flag(&sampler_hash, "topic").expect("sampler-hash --topic");
    assert_ne!(dkg_topic, hash_topic);
    assert_eq!(flag(&lg_dkg, "topic").as_ref(), Some(&dkg_topic));
    assert_eq!(flag(&lg_hash, "topic").as_ref(), Some(&hash_topic));
    // The DKG side publishes and produces through the wrapper; the hash side does neither.
    assert!(flag(&sampler, "dry-run").is_none());
    assert!(flag(&sampler_hash, "dry-run").is_some());
    assert!(flag(&lg_dkg, "plain").is_none());
    assert!(flag(&lg_hash, "plain").is_some());
    // The DKG side also takes part in the consumers' ordering protocol (held records, hold times).
    assert!(flag(&lg_dkg, "ordering").is_some());
    // Same workload: every other loadgen flag is identical.
    let strip = |f: &[(String, Option<String>)]| -> Vec<(String, Option<String>)> {
        f.iter()
            .filter(|(k, _)| k != "topic" && k != "plain" && k != "ordering")
            .cloned()
            .collect()
    };
    assert_eq!(
        strip(&lg_dkg),
        strip(&lg_hash),
        "the two load generators differ"
    );

    // Both twin topics are consumed by identical groups; only the topic, group and member names differ.
    let cons_dkg = flags(&cmd("consumer-dkg"));
    let cons_hash = flags(&cmd("consumer-hash"));
    assert_eq!(cmd("consumer-dkg")[0], "consume");
    assert_eq!(cmd("consumer-hash")[0], "consume");
    assert_eq!(flag(&cons_dkg, "topic").as_ref(), Some(&dkg_topic));
    assert_eq!(flag(&cons_hash, "topic").as_ref(), Some(&hash_topic));
    assert_ne!(flag(&cons_dkg, "group-id"), flag(&cons_hash, "group-id"));
    assert_ne!(
        flag(&cons_dkg, "member-prefix"),
        flag(&cons_hash, "member-prefix"),
        "the consumers' member labels must differ"
    );
    let strip_consumer = |f: &[(String, Option<String>)]| -> Vec<(String, Option<String>)> {
        f.iter()
            .filter(|(k, _)| !matches!(k.as_str(), "topic" | "group-id" | "member-prefix"))
            .cloned()
            .collect()
    };
    assert_eq!(
        strip_consumer(&cons_dkg),
        strip_consumer(&cons_hash),
        "the two consumer groups differ"
    );
    // The story needs a cost per record: the hash topic's hottest partition must exceed one
    // member's capacity (1e6 / work-us records/s) while a DKG partition (~1/12 of the rate) stays
    // under it. With Zipf(1) over many keys the hottest key alone is ~8% of the records and hashing
    // puts ~20% on the hottest partition (docs/lab.md, the compose stack); require a margin of 25% both ways.
    let work_us: f64 = flag(&cons_dkg, "work-us")
        .expect("consumer-dkg --work-us")
        .parse()
        .unwrap();
    let rate: f64 = flag(&lg_dkg, "rate")
        .expect("loadgen-dkg --rate")
        .parse()
        .unwrap();
    let members: f64 = flag(&cons_dkg, "members")
        .expect("consumer-dkg --members")
        .parse()
        .unwrap();
    assert_eq!(members, 12.0, "one consumer per partition");
    let capacity = 1e6 / work_us;
    assert!(
        rate / 12.0 * 1.25 < capacity && rate * 0.20 > capacity * 1.25,
        "--work-us={work_us}: a member's {capacity:.0} records/s must sit between a balanced \
         partition's {:.0} and the hash topic's hottest {:.0} (with margins)",
        rate / 12.0,
        rate * 0.2
    );

    // init creates both data topics with 12 partitions and the compacted control topic.
    for t in [&dkg_topic, &hash_topic] {
        assert!(init.contains(t.as_str()), "init does not create {t}");
    }
    assert!(
        init.contains("--partitions 12"),
        "data topics: 12 partitions"
    );
    let control = flag(&sampler, "control-topic").unwrap_or_else(|| "_dkg.assignments".into());
    assert_eq!(
        flag(&sampler_hash, "control-topic").unwrap_or_else(|| "_dkg.assignments".into()),
        control
    );
    assert!(
        init.contains(&format!("--topic {control} --partitions 1"))
            && init.contains("cleanup.policy=compact"),
        "init must create the control topic {control} with 1 partition and cleanup.policy=compact"
    );
    // Every dkg service talks to the broker's in-network listener.
    let advertised = c.service("kafka")["environment"]["KAFKA_ADVERTISED_LISTENERS"]
        .as_str()
        .unwrap()
        .to_string();
    for (name, args) in &dkg {
        let bs = flag(&flags(args), "bootstrap-servers")
            .unwrap_or_else(|| panic!("{name}: --bootstrap-servers"));
        assert!(
            advertised.contains(&format!("://{bs}")),
            "{name}: bootstrap {bs} is not an advertised listener ({advertised})"
        );
    }
}

#[test]
fn compose_mounts_exist_and_grafana_provisioning_matches() {
    let c = Compose::load();
    let root = repo_root();
    let declared_volumes: BTreeSet<String> = c.doc["volumes"]
        .as_mapping()
        .map(|m| m.keys().map(|k| k.as_str().unwrap().to_string()).collect())
        .unwrap_or_default();
    // container path -> repo path, per service
    let mut binds: BTreeMap<String, Vec<(String, std::path::PathBuf)>> = BTreeMap::new();
    for (name, s) in c.services() {
        for v in strings(&s["volumes"]) {
            let mut parts = v.split(':');
            let src = parts.next().unwrap();
            let dst = parts
                .next()
                .unwrap_or_else(|| panic!("{name}: volume {v:?}"));
            if src.starts_with("./") || src.starts_with('/') {
                assert!(
                    src.starts_with("./"),
                    "{name}: mount {src} is outside the repo"
                );
                let path = root.join(src.trim_start_matches("./"));
                assert!(
                    path.exists(),
                    "{name}: mounted {src} does not exist in the repo"
                );
                binds
                    .entry(name.clone())
                    .or_default()
                    .push((dst.to_string(), path));
            } else {
                assert!(
                    declared_volumes.contains(src),
                    "{name}: named volume {src} is not declared"
                );
            }
        }
    }
    // Resolves a container path of a service to the repo file it is mounted from.
    let resolve = |svc: &str, container: &str| -> std::path::PathBuf {
        binds
            .get(svc)
            .into_iter()
            .flatten()
            .filter(|(dst, _)| container == dst || container.starts_with(&format!("{dst}/")))
            .max_by_key(|(dst, _)| dst.len())
            .map(|(dst, src)| src.join(container[dst.len()..].trim_start_matches('/')))
            .unwrap_or_else(|| panic!("{svc}: {container} is not mounted from the repo"))
    };

    // Prometheus reads the repo's config.
    let prom_args = strings(&c.service("prometheus")["command"]);
    let config = flag(&flags(&prom_args), "config.file").expect("prometheus --config.file");
    assert_eq!(
        resolve("prometheus", &config),
        root.join("deploy/prometheus/prometheus.yml")
    );

    // Grafana: provisioning directories mounted from deploy/, dashboards from dashboards/.
    let ds_dir = resolve("grafana", "/etc/grafana/provisioning/datasources");
    let db_dir = resolve("grafana", "/etc/grafana/provisioning/dashboards");
    assert_eq!(ds_dir, root.join("deploy/grafana/provisioning/datasources"));
    assert_eq!(db_dir, root.join("deploy/grafana/provisioning/dashboards"));
    let mut providers = 0;
    for entry in std::fs::read_dir(&db_dir).unwrap() {
        let path = entry.unwrap().path();
        if !path.extension().is_some_and(|x| x == "yml" || x == "yaml") {
            continue;
        }
        let y = read_yaml(&path);
        for p in y["providers"].as_sequence().expect("providers list") {
            providers += 1;
            let container = p["options"]["path"]
                .as_str()
                .expect("provider options.path");
            let host = resolve("grafana", container);
            assert_eq!(
                host,
                root.join("dashboards"),
                "provider {:?} must load the repo's dashboards/",
                p["name"]
            );
            assert_eq!(p["type"].as_str(), Some("file"));
        }
    }
    assert!(
        providers >= 1,
        "no dashboard provider in {}",
        db_dir.display()
    );
    let home = c.service("grafana")["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
        .as_str()
        .expect("grafana home dashboard");
    assert!(
        resolve("grafana", home).is_file(),
        "home dashboard {home} missing"
    );

    // The datasource Grafana provisions is the compose Prometheus, on its listen port.
    let datasources = provisioned_datasources();
    assert_eq!(datasources.len(), 1, "{datasources:?}");
    let (uid, kind, url) = &datasources[0];
    assert_eq!(kind, "prometheus");
    let listen =
        flag(&flags(&prom_args), "web.listen-address").unwrap_or_else(|| "0.0.0.0:9090".into());
    assert_eq!(url, &format!("http://prometheus:{}", port_of(&listen)));

    // The dashboards ask their datasource variable, which Grafana resolves to the default datasource.
    let ds_file =
        read_yaml(&repo_root().join("deploy/grafana/provisioning/datasources/prometheus.yml"));
    assert_eq!(
        ds_file["datasources"][0]["isDefault"].as_bool(),
        Some(true),
        "the provisioned Prometheus must be Grafana's default datasource"
    );

    // Every dashboard references exactly that datasource, without export placeholders.
    for (path, dash) in dashboards() {
        let text = read(&path);
        assert!(
            !text.contains("${DS_"),
            "{}: export placeholder",
            path.display()
        );
        assert!(
            dash.get("__inputs").is_none(),
            "{}: __inputs",
            path.display()
        );
        let duid = dash["uid"].as_str().unwrap_or("");
        assert!(
            !duid.is_empty() && duid.len() <= 40,
            "{}: stable uid",
            path.display()
        );
        assert!(
            dash.get("id").is_none_or(|v| v.is_null()),
            "{}: drop the numeric id",
            path.display()
        );
        let uids = datasource_uids(&dash);
        assert!(
            !uids.is_empty(),
            "{}: no datasource referenced",
            path.display()
        );
        // Panels ask the dashboard's datasource variable, which Grafana sets to its default datasource: the
        // provisioned one is the default (isDefault), so the stack's Grafana shows its Prometheus.
        assert_eq!(
            prometheus_datasource_variable(&dash).as_deref(),
            Some("datasource"),
            "{}: no Prometheus datasource variable",
            path.display()
        );
        for u in uids {
            assert!(
                &u == uid || u == GRAFANA_BUILTIN_UID || u == DATASOURCE_VARIABLE_UID,
                "{}: datasource uid {u:?} is neither the provisioned {uid:?} nor {DATASOURCE_VARIABLE_UID}",
                path.display()
            );
        }
    }
}

#[test]
fn compose_ports_are_published_and_prometheus_scrapes_every_metrics_port() {
    let c = Compose::load();
    let mut host_ports = BTreeMap::new();
    let mut container_port_of = BTreeMap::new();
    for (name, s) in c.services() {
        for p in strings(&s["ports"]) {
            let (host, container) = published(&p);
            if let Some(other) = host_ports.insert(host, name.clone()) {
                panic!("host port {host} published by {other} and {name}");
            }
            container_port_of.insert((name.clone(), host), container);
        }
    }
    assert_eq!(host_ports.get(&3000).map(String::as_str), Some("grafana"));
    assert_eq!(
        host_ports.get(&9090).map(String::as_str),
        Some("prometheus")
    );
    assert_eq!(container_port_of[&("grafana".to_string(), 3000)], 3000);

    // Services serving metrics: the dkg ones (--metrics-addr).
    let mut metrics: BTreeMap<String, u16> = BTreeMap::new();
    for (name, args) in dkg_services(&c) {
        let addr = flag(&flags(&args), "metrics-addr")
            .unwrap_or_else(|| panic!("{name}: no --metrics-addr: Prometheus cannot scrape it"));
        assert!(
            addr.starts_with("0.0.0.0:"),
            "{name}: --metrics-addr {addr} must listen on all interfaces inside the container"
        );
        metrics.insert(name, port_of(&addr));
    }
    for svc in ["sampler", "sampler-hash"] {
        assert!(
            container_port_of
                .iter()
                .any(|((n, _), cport)| n == svc && *cport == metrics[svc]),
            "{svc}: its metrics port {} is not published",
            metrics[svc]
        );
    }

    // Targets of the repo's Prometheus config are exactly the metrics endpoints of the stack.
    let prom = read_yaml(&repo_root().join("deploy/prometheus/prometheus.yml"));
    let mut scraped = BTreeMap::new();
    for job in prom["scrape_configs"]
        .as_sequence()
        .expect("scrape_configs")
    {
        for sc in job["static_configs"].as_sequence().into_iter().flatten() {
            for t in strings(&sc["targets"]) {
                let (host, port) = t.rsplit_once(':').expect("host:port target");
                let port: u16 = port.parse().unwrap();
                if host == "localhost" {
                    assert_eq!(job["job_name"].as_str(), Some("prometheus"));
                    continue;
                }
                scraped.insert(host.to_string(), port);
            }
        }
    }
    assert_eq!(
        scraped, metrics,
        "Prometheus targets vs services' --metrics-addr"
    );
}

/// Every command line of the stack's dkg-sampler and dkg-lab services names a real subcommand and real
/// flags of its image's binary.
#[test]
fn compose_commands_are_accepted_by_their_binaries() {
    let c = Compose::load();
    for (name, args) in dkg_services(&c) {
        let image = c.service(&name)["image"].as_str().unwrap().to_owned();
        let binary = dkg_binary(&image).unwrap();
        let bin = match binary {
            "dkg-lab" => std::path::PathBuf::from(env!("CARGO_BIN_EXE_dkg-lab")),
            _ => dkg_testkit::process::workspace_bin(binary),
        };
        let bin = bin.display().to_string();
        let sub = &args[0];
        let out = Command::new(&bin)
            .args([sub.as_str(), "--help"])
            .output()
            .unwrap_or_else(|e| panic!("running {bin}: {e}"));
        let help = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{name}: `{binary} {sub} --help` failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        for (f, _) in flags(&args[1..]) {
            assert!(
                help.contains(&format!("--{f}")),
                "{name}: `{binary} {sub}` has no flag --{f}:\n{help}"
            );
        }
    }
}

/// If a Compose CLI is installed (not on CI machines: no Docker there), it must accept the file too.
#[test]
fn compose_file_passes_docker_compose_config_when_available() {
    let root = repo_root();
    let candidates: [&[&str]; 2] = [&["docker", "compose"], &["docker-compose"]];
    for cmd in candidates {
        let probe = Command::new(cmd[0]).args(&cmd[1..]).arg("version").output();
        let Ok(probe) = probe else { continue };
        let version = String::from_utf8_lossy(&probe.stdout);
        // Compose v1 (Python) predates the top-level `name:` of the Compose Specification.
        if !probe.status.success() || version.contains("version 1.") {
            continue;
        }
        let out = Command::new(cmd[0])
            .args(&cmd[1..])
            .args(["-f", "docker-compose.yml", "config", "-q"])
            .current_dir(&root)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{} config -q: {}",
            cmd.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        eprintln!("validated with {}", version.trim());
        return;
    }
    // Nothing to run: the structural tests above carry the check.
    assert!(Path::new(&root.join("docker-compose.yml")).is_file());
}
