//! `dkg-lab consume` on the real broker: a group of `DkgConsumer` members processes every record of
//! a topic produced without the DKG wrapper (no `dkg-*` headers), exactly once over the run, reports
//! where the records were, serves the members' `dkg_consumer_*` metrics, and leaves cleanly at
//! `--count` or on SIGTERM: the final commit means a rerun of the group gets nothing again.

#[path = "../../sampler/tests/common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::*;
use dkg_testkit::broker::client_config;
use rdkafka::producer::{FutureProducer, FutureRecord};

/// Produce `n` keyed records (skewed: key `i % 97`, then `i % 7` for every third) with a plain
/// producer; returns the records per partition from the delivery reports.
async fn produce(topic: &str, n: u32) -> BTreeMap<i32, u64> {
    let producer: FutureProducer = client_config(&bootstrap())
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .create()
        .expect("producer");
    let mut futures = Vec::new();
    for i in 0..n {
        let key = if i % 3 == 0 {
            format!("hot-{}", i % 7)
        } else {
            format!("key-{}", i % 97)
        };
        let payload = format!("record {i}");
        let sent = producer.send_result(
            FutureRecord::<'_, String, String>::to(topic)
                .key(&key)
                .payload(&payload),
        );
        futures.push(sent.map_err(|(e, _)| e).expect("enqueued"));
    }
    let mut per_partition = BTreeMap::new();
    for f in futures {
        let delivery = f.await.expect("delivery report").expect("delivered");
        *per_partition.entry(delivery.partition).or_insert(0) += 1;
    }
    per_partition
}

/// `dkg-lab consume` with stdout piped (the summary) and the log in a file (a pipe nobody reads
/// could fill up and block it).
fn consume(topic: &str, group: &str, extra: &[&str]) -> Running {
    let log = std::fs::File::create(log_path(topic)).expect("log file");
    let child = Command::new(env!("CARGO_BIN_EXE_dkg-lab"))
        .arg("consume")
        .args(["--bootstrap-servers", &bootstrap(), "--topic", topic])
        .args(["--group-id", group])
        .args(extra)
        .env("DKG_LOG", "info,librdkafka=warn,rdkafka=warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .expect("spawn dkg-lab consume");
    Running(Some(child))
}

/// The child process, killed if a failing test leaves it running.
struct Running(Option<Child>);

impl Running {
    fn id(&self) -> u32 {
        self.0.as_ref().map_or(0, Child::id)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn log_path(topic: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("{topic}-consume.log"))
}

/// Wait at most `timeout` for the child to exit; kill it and fail otherwise.
fn finish(mut running: Running, topic: &str, timeout: Duration) -> Output {
    let mut child = running.0.take().expect("a running child");
    let deadline = Instant::now() + timeout;
    while child.try_wait().expect("try_wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!(
                "consume did not exit within {timeout:?}\nstdout:\n{}\nlog:\n{}",
                String::from_utf8_lossy(&out.stdout),
                std::fs::read_to_string(log_path(topic)).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().expect("output")
}

/// The summary printed at exit: total, records per partition, records per member.
#[derive(Debug)]
struct Summary {
    total: u64,
    partitions: BTreeMap<i32, u64>,
    members: BTreeMap<String, u64>,
}

fn summary(out: &Output, topic: &str) -> Summary {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "consume failed ({}):\nstdout:\n{stdout}\nlog:\n{}",
        out.status,
        std::fs::read_to_string(log_path(topic)).unwrap_or_default()
    );
    let mut lines = stdout.lines();
    let head = lines
        .find(|l| l.starts_with("consumed "))
        .unwrap_or_else(|| panic!("no summary in:\n{stdout}"));
    let total = head
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .expect("total in the summary");
    let (mut partitions, mut members) = (BTreeMap::new(), BTreeMap::new());
    let mut section = "";
    for line in lines {
        let cols: Vec<&str> = line.split_whitespace().collect();
        match cols.first().copied() {
            Some("partition") | Some("member") => section = cols[0],
            Some(first) if cols.len() >= 3 && cols[2].ends_with('%') => {
                let n: u64 = cols[1].parse().expect("records column");
                if section == "partition" {
                    partitions.insert(first.parse().expect("partition number"), n);
                } else {
                    members.insert(first.to_owned(), n);
                }
            }
            _ => {}
        }
    }
    Summary {
        total,
        partitions,
        members,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consume_processes_every_record_once_and_stops_at_count() {
    every_record_once(&[]).await;
}

/// The same with the members on the KIP-848 consumer group protocol (`--kafka-config
/// group.protocol=consumer`, nothing else of the group's set): they join, share the partitions the
/// broker assigns, and commit where a later run resumes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consume_under_the_consumer_group_protocol() {
    every_record_once(&["--kafka-config", "group.protocol=consumer"]).await;
}

async fn every_record_once(protocol_args: &[&str]) {
    let topic = unique_topic("consume-count");
    let group = format!("{topic}-group");
    create_topic(&bootstrap(), &topic, 6, &[]).await;
    let produced = produce(&topic, 3000).await;

    tokio::task::block_in_place(|| {
        let args = [
            &["--members", "3", "--count", "3000", "--member-prefix", "m"][..],
            protocol_args,
        ]
        .concat();
        let child = consume(&topic, &group, &args);
        let s = summary(&finish(child, &topic, Duration::from_secs(90)), &topic);
        assert_eq!(s.total, 3000, "{s:?}");
        assert_eq!(s.partitions, produced, "records per partition: {s:?}");
        assert_eq!(
            s.members.keys().cloned().collect::<Vec<_>>(),
            ["m-0", "m-1", "m-2"],
            "one line per member: {s:?}"
        );
        assert_eq!(s.members.values().sum::<u64>(), 3000, "{s:?}");
    });

    // Every member closed with a final commit: the group's next run resumes exactly there, so it
    // gets the new records and none of the old ones (which would show in the per-partition counts).
    let more = produce(&topic, 200).await;
    tokio::task::block_in_place(|| {
        let args = [&["--count", "200"][..], protocol_args].concat();
        let child = consume(&topic, &group, &args);
        let again = summary(&finish(child, &topic, Duration::from_secs(60)), &topic);
        assert_eq!(again.total, 200, "{again:?}");
        assert_eq!(
            again.partitions, more,
            "the rerun resumes from the committed offsets: {again:?}"
        );
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consume_serves_consumer_metrics_and_closes_cleanly_on_sigterm() {
    let topic = unique_topic("consume-sigterm");
    let group = format!("{topic}-group");
    create_topic(&bootstrap(), &topic, 4, &[]).await;
    let produced = produce(&topic, 2000).await;

    tokio::task::block_in_place(|| {
        let addr: SocketAddr = free_addr();
        let child = consume(
            &topic,
            &group,
            &[
                "--members",
                "2",
                "--work-us",
                "200",
                "--metrics-addr",
                &addr.to_string(),
            ],
        );
        let metrics = || {
            http_get(addr, "/metrics")
                .ok()
                .map(|(_, body)| parse_metrics(&body))
        };
        let topic_label = [("topic", topic.as_str())];
        // Every record handed out, counted per partition and per member.
        wait_for(
            "every record in dkg_consumer_records_total",
            Duration::from_secs(60),
            || {
                let m = metrics()?;
                let sum = |name: &str| -> f64 {
                    m.iter()
                        .filter(|s| s.name == name && s.labels.get("topic") == Some(&topic))
                        .map(|s| s.value)
                        .sum()
                };
                (sum("dkg_consumer_records_total") == 2000.0
                    && sum("dkg_consumer_member_records_total") == 2000.0)
                    .then_some(())
            },
        );
        let m = metrics().expect("metrics");
        for (&p, &n) in &produced {
            let counted: f64 = m
                .iter()
                .filter(|s| {
                    s.name == "dkg_consumer_records_total"
                        && s.labels.get("topic") == Some(&topic)
                        && s.labels.get("partition") == Some(&p.to_string())
                })
                .map(|s| s.value)
                .sum();
            assert_eq!(counted, n as f64, "partition {p}");
        }
        assert!(
            find(&m, "dkg_consumer_hold_seconds_count", &topic_label).is_some(),
            "the hold histogram is exported"
        );
        // The lag gauge (from librdkafka's statistics, every 5 s) reaches 0. A member exports it for
        // the partitions it has fetched from since their assignment (one that joined after the
        // records were consumed has no position on its partitions yet), so: every exported series.
        wait_for("zero lag everywhere", Duration::from_secs(30), || {
            let m = metrics()?;
            let lags: Vec<f64> = m
                .iter()
                .filter(|s| {
                    s.name == "dkg_consumer_lag_records" && s.labels.get("topic") == Some(&topic)
                })
                .map(|s| s.value)
                .collect();
            (!lags.is_empty() && lags.iter().all(|&l| l == 0.0)).then_some(())
        });
        // The group settles with both members owning partitions (the first member to join took
        // them all), as /healthz reports; stopping in a stable group.
        let health = wait_for(
            "both members owning partitions in /healthz",
            Duration::from_secs(60),
            || {
                let (code, body) = http_get(addr, "/healthz").ok()?;
                let h: serde_json::Value = serde_json::from_str(&body).expect("JSON health");
                let owned: Vec<usize> = h["members"]
                    .as_object()?
                    .values()
                    .map(|p| p.as_array().map_or(0, Vec::len))
                    .collect();
                (code == 200 && owned.len() == 2 && owned.iter().all(|&n| n > 0)).then_some(h)
            },
        );
        assert_eq!(health["state"], "running");
        assert_eq!(health["records"], 2000);

        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        let s = summary(&finish(child, &topic, Duration::from_secs(60)), &topic);
        assert_eq!(s.total, 2000, "{s:?}");
        assert_eq!(s.partitions, produced, "{s:?}");
        assert_eq!(s.members.len(), 2, "{s:?}");
    });
}
