//! The Grafana dashboards work against the real stack, proven without Docker: the broker of
//! `scripts/kafka`, the samplers, consumer groups and load generators of `docker-compose.yml` run as
//! child processes of the `dkg-sampler` and `dkg-lab` binaries with the very command lines of the compose file (broker
//! address, topics, groups, ports and interval rewritten), and Debian's `prometheus` with the repo's
//! `deploy/prometheus/prometheus.yml` (targets rewritten to 127.0.0.1, a 1 s scrape interval). Then
//! every PromQL expression of every panel and annotation in `dashboards/` must parse and return data
//! through Prometheus' HTTP API, as Grafana would send it (template variables and `$__rate_interval`
//! substituted), and the stack must tell its story: the hash topic's hottest partition's consumer
//! falls behind while the DKG topic's consumers keep up.
//!
//! Needs `prometheus` on PATH (or `DKG_PROMETHEUS_BIN`): `scripts/setup` (run by `scripts/test`)
//! installs Debian's package. A missing
//! Prometheus or broker fails the test.
#![allow(clippy::unwrap_used)]

mod dashboards_common;

use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use dashboards_common::{
    Macros, PanelQuery, dashboards, queries, read_yaml, repo_root, substitute, variables,
};
use dkg_testkit::process::http_get_with_head;
use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use serde_json::Value as Json;
use serde_yaml_ng::Value as Yaml;

/// Scrape interval of the test's Prometheus; `$__rate_interval` is 4x it, as Grafana computes it.
const SCRAPE: &str = "1s";
const RATE_INTERVAL: &str = "4s";
/// The samplers' interval in the test (the compose file uses a longer one).
const INTERVAL_SECS: &str = "2";

// ------------------------------------------------------------------------------------------------------
// Processes
// ------------------------------------------------------------------------------------------------------

/// A child process, killed when dropped; its output goes to a log file printed on failure.
struct Proc {
    name: String,
    child: Child,
    log: PathBuf,
}

impl Proc {
    fn spawn(name: &str, program: &Path, args: &[String], dir: &Path) -> Self {
        let log = dir.join(format!("{name}.log"));
        let file = std::fs::File::create(&log).unwrap();
        let child = Command::new(program)
            .args(args)
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {name} ({} {args:?}): {e}", program.display()));
        eprintln!("started {name}: {} {}", program.display(), args.join(" "));
        Self {
            name: name.to_string(),
            child,
            log,
        }
    }

    fn assert_running(&mut self) {
        if let Ok(Some(status)) = self.child.try_wait() {
            panic!(
                "{} exited early ({status}):\n{}",
                self.name,
                tail(&self.log, 40)
            );
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!(
                "----- {} ({}) -----\n{}",
                self.name,
                self.log.display(),
                tail(&self.log, 30)
            );
        }
    }
}

fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn prometheus_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("DKG_PROMETHEUS_BIN") {
        return PathBuf::from(p);
    }
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .chain([PathBuf::from("/usr/bin"), PathBuf::from("/usr/sbin")])
        .map(|d| d.join("prometheus"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "prometheus not found on PATH: install it (Debian: apt-get install -y prometheus; \
                 scripts/setup does) or set DKG_PROMETHEUS_BIN"
            )
        })
}

/// The broker: `DKG_TEST_BOOTSTRAP` if set, else `scripts/kafka start` (idempotent: reuses a running
/// broker; a failure to start fails the test).
fn bootstrap_servers() -> String {
    if let Ok(bs) = std::env::var("DKG_TEST_BOOTSTRAP")
        && !bs.trim().is_empty()
    {
        return bs;
    }
    let out = Command::new("bash")
        .arg(repo_root().join("scripts/kafka"))
        .arg("start")
        .stderr(Stdio::inherit())
        .output()
        .expect("running scripts/kafka start");
    assert!(
        out.status.success(),
        "scripts/kafka start failed: the broker is required"
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .last()
        .expect("scripts/kafka start prints the bootstrap address")
        .trim()
        .to_string()
}

fn create_topics(bootstrap: &str, topics: &[&str], partitions: u32) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for topic in topics {
        rt.block_on(dkg_testkit::broker::create_topic(
            bootstrap,
            topic,
            partitions,
            &[],
        ));
    }
}

// ------------------------------------------------------------------------------------------------------
// HTTP
// ------------------------------------------------------------------------------------------------------

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

struct Prometheus {
    addr: SocketAddr,
}

impl Prometheus {
    fn api(&self, path: &str) -> Json {
        let (code, _, body) = http_get_with_head(self.addr, path)
            .unwrap_or_else(|e| panic!("Prometheus {path}: {e}"));
        serde_json::from_str(&body)
            .unwrap_or_else(|e| panic!("Prometheus {path}: HTTP {code}, not JSON ({e}): {body}"))
    }

    fn query(&self, expr: &str) -> Json {
        self.api(&format!("/api/v1/query?query={}", urlencode(expr)))
    }

    fn query_range(&self, expr: &str, start: f64, end: f64) -> Json {
        self.api(&format!(
            "/api/v1/query_range?query={}&start={start:.3}&end={end:.3}&step=1",
            urlencode(expr)
        ))
    }

    fn scalar(&self, expr: &str) -> Option<f64> {
        let r = self.query(expr);
        r["data"]["result"][0]["value"][1]
            .as_str()
            .and_then(|v| v.parse().ok())
    }
}

fn now_secs() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

// ------------------------------------------------------------------------------------------------------
// docker-compose.yml -> local command lines
// ------------------------------------------------------------------------------------------------------

/// The compose services that run `dkg-sampler` or `dkg-lab`, with their command lines.
fn compose_dkg_commands() -> BTreeMap<String, Vec<String>> {
    let compose = read_yaml(&repo_root().join("docker-compose.yml"));
    compose["services"]
        .as_mapping()
        .unwrap()
        .iter()
        .filter(|(_, s)| {
            s["image"]
                .as_str()
                .is_some_and(|i| i.starts_with("dkg-sampler:") || i.starts_with("dkg-lab:"))
        })
        .map(|(name, s)| {
            let cmd = s["command"]
                .as_sequence()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap().to_string())
                .collect();
            (name.as_str().unwrap().to_string(), cmd)
        })
        .collect()
}

/// Rewrites one `--flag=value` / `--flag value` argument list.
fn rewrite(args: &[String], replace: &dyn Fn(&str, &str) -> Option<String>) -> Vec<String> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        if let Some(rest) = a.strip_prefix("--") {
            let (flag, value, consumed) = match rest.split_once('=') {
                Some((f, v)) => (f.to_string(), Some(v.to_string()), 1),
                None if args.get(i + 1).is_some_and(|n| !n.starts_with("--")) => {
                    (rest.to_string(), Some(args[i + 1].clone()), 2)
                }
                None => (rest.to_string(), None, 1),
            };
            match value {
                Some(v) => out.push(format!("--{flag}={}", replace(&flag, &v).unwrap_or(v))),
                None => out.push(a.clone()),
            }
            i += consumed;
        } else {
            out.push(a.clone());
            i += 1;
        }
    }
    out
}

/// `deploy/prometheus/prometheus.yml` with every `service:port` target pointed at the local process and
/// a 1 s scrape interval.
fn local_prometheus_config(
    targets: &BTreeMap<String, SocketAddr>,
    self_addr: SocketAddr,
) -> String {
    let mut cfg = read_yaml(&repo_root().join("deploy/prometheus/prometheus.yml"));
    cfg["global"]["scrape_interval"] = Yaml::String(SCRAPE.into());
    cfg["global"]["evaluation_interval"] = Yaml::String(SCRAPE.into());
    for job in cfg["scrape_configs"].as_sequence_mut().unwrap() {
        if let Some(m) = job.as_mapping_mut() {
            m.remove("scrape_interval");
        }
        for sc in job["static_configs"].as_sequence_mut().unwrap() {
            for t in sc["targets"].as_sequence_mut().unwrap() {
                let host_port = t.as_str().unwrap().to_string();
                let (host, _) = host_port.rsplit_once(':').unwrap();
                let local = if host == "localhost" {
                    self_addr
                } else {
                    *targets.get(host).unwrap_or_else(|| {
                        panic!("target {host_port}: no such compose service runs here")
                    })
                };
                *t = Yaml::String(local.to_string());
            }
        }
    }
    serde_yaml_ng::to_string(&cfg).unwrap()
}

// ------------------------------------------------------------------------------------------------------
// The test
// ------------------------------------------------------------------------------------------------------

#[test]
fn every_dashboard_query_parses_and_returns_data_from_the_live_stack() {
    let prometheus = prometheus_bin();
    // The sidecar is the product binary; the load generators and consumers are the lab's.
    let sampler_bin = dkg_testkit::process::workspace_bin("dkg-sampler");
    let lab_bin = PathBuf::from(env!("CARGO_BIN_EXE_dkg-lab"));
    let work = std::env::temp_dir().join(format!("dkg-dashboards-live-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    let bootstrap = bootstrap_servers();

    // The compose topics, renamed per run so reruns and other tests never share them.
    let run_id = format!("{}-{}", std::process::id(), now_secs() as u64);
    let commands = compose_dkg_commands();
    let mut topic_map: BTreeMap<String, String> = BTreeMap::new();
    for args in commands.values() {
        let seen = std::cell::RefCell::new(Vec::new());
        rewrite(args, &|flag, value| {
            if flag == "topic" {
                seen.borrow_mut().push(value.to_string());
            }
            None
        });
        for t in seen.into_inner() {
            let local = format!("dash-{t}-{run_id}");
            topic_map.entry(t).or_insert(local);
        }
    }
    assert!(
        topic_map.len() >= 2,
        "expected twin topics in docker-compose.yml: {topic_map:?}"
    );
    let local_topics: Vec<&str> = topic_map.values().map(String::as_str).collect();
    create_topics(&bootstrap, &local_topics, 12);

    // Ports first, so Prometheus runs before anything it scrapes: it must see the first epoch change
    // (0 -> 1), which the publish annotation and the epoch panels show.
    let addrs: BTreeMap<String, SocketAddr> = commands
        .keys()
        .map(|name| {
            (
                name.clone(),
                format!("127.0.0.1:{}", free_port()).parse().unwrap(),
            )
        })
        .collect();
    let prom_addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let config = work.join("prometheus.yml");
    std::fs::write(&config, local_prometheus_config(&addrs, prom_addr)).unwrap();
    let mut procs: Vec<Proc> = vec![Proc::spawn(
        "prometheus",
        &prometheus,
        &[
            format!("--config.file={}", config.display()),
            format!("--storage.tsdb.path={}", work.join("tsdb").display()),
            format!("--web.listen-address={prom_addr}"),
            "--storage.tsdb.retention.time=1h".into(),
            "--log.level=warn".into(),
        ],
        &work,
    )];
    let prom = Prometheus { addr: prom_addr };
    let started = now_secs();
    wait_for(
        "Prometheus ready",
        Duration::from_secs(60),
        &mut procs,
        || http_get_with_head(prom_addr, "/-/ready").is_ok_and(|(code, _, _)| code == 200),
    );

    // Samplers first (the DKG loadgen depends on the sampler in compose too), then the consumer groups
    // (members joined before records flow: they see the first epoch switch live), then the load
    // generators.
    let mut order: Vec<(&String, &Vec<String>)> = commands.iter().collect();
    order.sort_by_key(|(_, args)| match args[0].as_str() {
        "run" => 0,
        "consume" => 1,
        _ => 2,
    });
    for (name, args) in order {
        let addr = addrs[name];
        let local = rewrite(args, &|flag, value| match flag {
            "bootstrap-servers" => Some(bootstrap.clone()),
            "metrics-addr" => Some(addr.to_string()),
            "topic" => topic_map.get(value).cloned(),
            "group-id" => Some(format!("{value}-{run_id}")),
            "interval-secs" => Some(INTERVAL_SECS.to_string()),
            _ => None,
        });
        let bin = if args[0] == "run" {
            &sampler_bin
        } else {
            &lab_bin
        };
        procs.push(Proc::spawn(name, bin, &local, &work));
        if args[0] == "run" || args[0] == "consume" {
            wait_for(
                &format!("{name} /healthz"),
                Duration::from_secs(60),
                &mut procs,
                || http_get_with_head(addr, "/healthz").is_ok_and(|(code, _, _)| code == 200),
            );
        }
    }

    // Prometheus 3 refuses a scrape without a valid Content-Type: the binary must send the text format's.
    for (name, addr) in &addrs {
        wait_for(
            &format!("{name} /metrics with dkg_ series"),
            Duration::from_secs(60),
            &mut procs,
            || {
                http_get_with_head(*addr, "/metrics")
                    .is_ok_and(|(code, _, body)| code == 200 && body.contains("\ndkg_"))
            },
        );
        let (code, head, body) = http_get_with_head(*addr, "/metrics").unwrap();
        assert_eq!(code, 200, "{name} /metrics");
        let ct = head
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("content-type:")
                    .map(|v| v.trim().to_string())
            })
            .unwrap_or_default();
        assert!(
            ct.starts_with("text/plain") && ct.contains("version=0.0.4"),
            "{name}: Content-Type {ct:?}"
        );
        assert!(body.contains("dkg_"), "{name}: no dkg_ metric in /metrics");
    }

    let expected_targets = addrs.len() + 1;
    wait_for(
        "every scrape target up",
        Duration::from_secs(60),
        &mut procs,
        || {
            let t = prom.api("/api/v1/targets");
            let active = t["data"]["activeTargets"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            active.len() == expected_targets && active.iter().all(|a| a["health"] == "up")
        },
    );

    // Every expression, as Grafana sends it: the dashboard variables' defaults mapped to this run's topics.
    let macros = Macros {
        interval: SCRAPE.into(),
        rate_interval: RATE_INTERVAL.into(),
        range: "5m".into(),
    };
    let mut all: Vec<(PanelQuery, String)> = Vec::new();
    for (path, dash) in dashboards() {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let vars: Vec<(String, String)> = variables(&dash)
            .into_iter()
            .map(|(k, v)| {
                let local = topic_map.get(&v).cloned().unwrap_or_else(|| {
                    panic!("{name}: variable {k} = {v:?} is no topic of the compose stack")
                });
                (k, local)
            })
            .collect();
        for q in queries(&name, &dash) {
            let expr = substitute(&q.expr, &vars, &macros);
            all.push((q, expr));
        }
    }
    assert!(
        all.len() >= 20,
        "only {} expressions in dashboards/",
        all.len()
    );

    // Every expression must return data, the consumer panels' included (the consumer groups run).
    // The hold-time quantiles return a series as soon as a consumer exports its hold histogram (its
    // value is NaN while no record was held within the rate window); that records really are held
    // at an epoch switch is checked below.
    let deadline = Instant::now() + Duration::from_secs(150);
    let mut missing: Vec<String>;
    loop {
        missing = Vec::new();
        for (q, expr) in &all {
            let r = if q.is_annotation {
                prom.query_range(expr, started, now_secs())
            } else {
                prom.query(expr)
            };
            assert_eq!(
                r["status"], "success",
                "{q}: {expr}\n  does not evaluate: {r}"
            );
            if r["data"]["result"].as_array().is_none_or(Vec::is_empty) {
                missing.push(format!("{q}: {expr}"));
            }
        }
        for p in &mut procs {
            p.assert_running();
        }
        if missing.is_empty() || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_secs(2));
    }
    assert!(
        missing.is_empty(),
        "{} of {} dashboard expressions returned no data:\n  {}",
        missing.len(),
        all.len(),
        missing.join("\n  ")
    );
    let consumer = all
        .iter()
        .filter(|(_, e)| e.contains("dkg_consumer_"))
        .count();
    assert!(
        consumer >= 6,
        "only {consumer} consumer expressions in dashboards/"
    );
    eprintln!(
        "{} expressions evaluated with data, {consumer} of them on the consumer groups' metrics",
        all.len()
    );

    // What the dashboard is for: the hash topic's skew beside the DKG topic's, through the same queries.
    let dkg_topic = &topic_map["orders-dkg"];
    let hash_topic = &topic_map["orders-hash"];
    let imbalance = |t: &str| {
        prom.scalar(&format!(
            "max(dkg_sampler_observed_imbalance_ratio{{topic=\"{t}\"}})"
        ))
    };
    let bound = || {
        prom.scalar(&format!(
            "max(dkg_sampler_key_grouping_bound_ratio{{topic=\"{dkg_topic}\"}})"
        ))
    };
    let mut last = (None, None, None);
    let ok = poll(Duration::from_secs(60), &mut procs, || {
        last = (imbalance(hash_topic), imbalance(dkg_topic), bound());
        matches!(last, (Some(h), Some(d), Some(_)) if d < h / 2.0)
    });
    eprintln!(
        "observed imbalance: hash {:?}, DKG {:?}, key-grouping bound {:?}",
        last.0, last.1, last.2
    );
    assert!(
        ok,
        "the DKG topic's imbalance did not fall below half the hash topic's: {last:?}"
    );

    // The consumers' side, through the lag panel's metric: every member processes at most
    // 1e6/--work-us records/s. The member of the hash topic's hottest partition gets more and falls
    // further behind every second; the DKG topic's members keep up (a backlog from before the first
    // epoch, when the DKG topic was hash-placed too, drains).
    let max_lag = |t: &str| prom.scalar(&format!("max(dkg_consumer_lag_records{{topic=\"{t}\"}})"));
    // The DKG load generator runs with --ordering (leases and markers), so records of keys an epoch
    // moved wait in their new partition until the old one is drained: the hold histogram fills.
    let held = || {
        prom.scalar(&format!(
            "sum(dkg_consumer_hold_seconds_count{{topic=\"{dkg_topic}\"}})"
        ))
    };
    let mut lags = (None, None);
    let mut holds = None;
    let ok = poll(Duration::from_secs(120), &mut procs, || {
        lags = (max_lag(hash_topic), max_lag(dkg_topic));
        holds = held();
        matches!(lags, (Some(h), Some(d)) if h >= 1000.0 && d * 5.0 < h)
            && holds.is_some_and(|n| n > 0.0)
    });
    eprintln!(
        "worst consumer lag (records): hash {:?}, DKG {:?}; records held at epoch switches: {holds:?}",
        lags.0, lags.1
    );
    assert!(
        ok,
        "the hash topic's worst consumer lag did not grow past 1000 records and 5x the DKG topic's \
         ({lags:?}), or no record was held at an epoch switch ({holds:?})"
    );

    drop(procs);
    delete_topics(&bootstrap, &local_topics);
    let _ = std::fs::remove_dir_all(&work);
}

/// Best-effort cleanup of this run's topics (their names are unique, so leftovers harm nothing).
fn delete_topics(bootstrap: &str, topics: &[&str]) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .unwrap();
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    if let Err(e) = rt.block_on(admin.delete_topics(topics, &opts)) {
        eprintln!("could not delete {topics:?}: {e}");
    }
}

fn poll(timeout: Duration, procs: &mut [Proc], mut ok: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if ok() {
            return true;
        }
        for p in procs.iter_mut() {
            p.assert_running();
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn wait_for(what: &str, timeout: Duration, procs: &mut [Proc], ok: impl FnMut() -> bool) {
    assert!(poll(timeout, procs, ok), "timed out waiting for {what}");
}
