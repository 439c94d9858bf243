//! The 3-broker KRaft cluster of `scripts/kafka cluster` (docs/operations.md, "Local Kafka"), for the fault tests:
//! started once per test binary if it is not running, brokers killed (SIGKILL), stopped and started
//! by number, partition leaders and ISRs read from the metadata, and a client context that counts
//! what librdkafka reported (the proof that a client saw the outage).
//!
//! The cluster is the one `scripts/kafka cluster` manages with the `DKG_KAFKA_CLUSTER_*` environment of
//! the test process. `DKG_TEST_CLUSTER_BOOTSTRAP`, when set, must name that same cluster (the helper
//! refuses to run otherwise: killing brokers of one cluster while the test talks to another would prove
//! nothing). No cluster reachable after `scripts/kafka cluster start` FAILS the test; nothing skips.
//!
//! Fault tests share one cluster and break its brokers on purpose, so [`Cluster::exclusive`] serialises
//! them within a test binary (cargo runs test binaries one at a time) and brings every broker back first.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use rdkafka::ClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::statistics::Statistics;

use crate::broker::{check_broker, client_config, create_replicated_topic};

/// Brokers in the cluster (node ids 1..=3).
pub const BROKERS: i32 = 3;

/// Records a fault test sends when `DKG_FAULT_RECORDS` is not set (the bounded version run by the
/// test command; `scripts/faults` sets 10^6).
pub const DEFAULT_FAULT_RECORDS: u64 = 200_000;

/// `DKG_FAULT_RECORDS` (the full fault runs of `scripts/faults`) or [`DEFAULT_FAULT_RECORDS`]; panics on
/// a value that is not a positive integer.
pub fn fault_records() -> u64 {
    match std::env::var("DKG_FAULT_RECORDS") {
        Ok(v) if !v.trim().is_empty() => match v.trim().parse::<u64>() {
            Ok(n) if n > 0 => n,
            _ => panic!("DKG_FAULT_RECORDS must be a positive integer, got {v:?}"),
        },
        _ => DEFAULT_FAULT_RECORDS,
    }
}

/// The test cluster: its bootstrap and the `scripts/kafka cluster` commands that act on it.
#[derive(Debug)]
pub struct Cluster {
    bootstrap: String,
    lock: Mutex<()>,
}

/// Held while a fault test owns the cluster (see [`Cluster::exclusive`]).
#[derive(Debug)]
pub struct Exclusive<'a> {
    _guard: MutexGuard<'a, ()>,
}

/// The cluster, started (`scripts/kafka cluster start`) on first use in this test binary if it does not
/// answer; panics if it cannot be had or if `DKG_TEST_CLUSTER_BOOTSTRAP` names another cluster.
pub fn cluster() -> &'static Cluster {
    static CLUSTER: OnceLock<Cluster> = OnceLock::new();
    CLUSTER.get_or_init(|| {
        let managed = start_managed(
            "cluster",
            "DKG_TEST_CLUSTER_BOOTSTRAP",
            "the fault tests would kill brokers of one cluster and watch another. Set \
             DKG_KAFKA_CLUSTER_PORT / DKG_KAFKA_CLUSTER_CONTROLLER_PORT / DKG_KAFKA_CLUSTER_DATA to that \
             cluster's",
        );
        if let Err(e) = check_broker(&managed, Duration::from_secs(30)) {
            panic!("the cluster at {managed} does not answer a metadata request ({e})");
        }
        Cluster {
            bootstrap: managed,
            lock: Mutex::new(()),
        }
    })
}

/// `scripts/kafka MODE start` (idempotent: starts what is not running, waits for all); its
/// bootstrap. Panics if `var` is set to another bootstrap than the one the script manages (`why`
/// says what would go wrong and which `DKG_KAFKA_*` settings select the right one).
pub(crate) fn start_managed(mode: &str, var: &str, why: &str) -> String {
    let managed = kafka_script(mode, &["bootstrap"], "");
    if let Some(wanted) = std::env::var(var).ok().filter(|s| !s.trim().is_empty()) {
        assert_eq!(
            normalise(&wanted),
            normalise(&managed),
            "{var}={wanted} is not the one `scripts/kafka {mode}` manages ({managed}): {why}, or unset {var}."
        );
    }
    let started = kafka_script(mode, &["start"], "");
    assert_eq!(normalise(&started), normalise(&managed));
    managed
}

fn normalise(bootstrap: &str) -> Vec<String> {
    let mut v: Vec<String> = bootstrap
        .split(',')
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect();
    v.sort();
    v
}

pub(crate) fn script_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/kafka")
}

/// `scripts/kafka MODE ARGS` with `stdin` as its input: stdout, trimmed; panics with stderr on
/// failure.
pub(crate) fn kafka_script(mode: &str, args: &[&str], stdin: &str) -> String {
    use std::io::Write as _;
    let path = script_path();
    let mut child = Command::new(&path)
        .arg(mode)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", path.display()));
    if let Some(mut input) = child.stdin.take() {
        input
            .write_all(stdin.as_bytes())
            .unwrap_or_else(|e| panic!("writing to scripts/kafka {mode}: {e}"));
    }
    let out = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("waiting for scripts/kafka {mode}: {e}"));
    assert!(
        out.status.success(),
        "`scripts/kafka {mode} {}` failed ({}):\n{}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// `scripts/kafka cluster ARGS`.
fn script(args: &[&str]) -> String {
    kafka_script("cluster", args, "")
}

impl Cluster {
    /// The bootstrap list of all three brokers.
    pub fn bootstrap(&self) -> &str {
        &self.bootstrap
    }

    /// Own the cluster for one test: waits for any other test of this binary to finish with it (a
    /// failed one included), then starts every broker that is down.
    pub fn exclusive(&self) -> Exclusive<'_> {
        let guard = self
            .lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        script(&["start"]);
        Exclusive { _guard: guard }
    }

    /// SIGKILL broker `n` (a crash: no controlled shutdown); returns when the process is gone.
    pub fn kill(&self, n: i32) {
        script(&["kill", &n.to_string()]);
    }

    /// Stop broker `n` gracefully (controlled shutdown, leadership moves first).
    pub fn stop_broker(&self, n: i32) {
        script(&["stop-broker", &n.to_string()]);
    }

    /// Start broker `n` again and wait until it answers metadata.
    pub fn start_broker(&self, n: i32) {
        script(&["start-broker", &n.to_string()]);
    }

    /// Broker `n`'s PID, if it is running.
    pub fn pid(&self, n: i32) -> Option<u32> {
        let out = Command::new(script_path())
            .args(["cluster", "pid", &n.to_string()])
            .output()
            .ok()?;
        String::from_utf8_lossy(&out.stdout).trim().parse().ok()
    }

    /// Creates `name` with replication factor 3 (min.insync.replicas 2 from the brokers) and waits until
    /// every partition has a leader. Panics on failure, "already exists" included.
    pub async fn create_topic(&self, name: &str, partitions: u32, config: &[(&str, &str)]) {
        create_replicated_topic(&self.bootstrap, name, partitions, BROKERS, config).await;
    }

    /// Leader and ISR of every partition of `topic`, by partition: `(leader, isr)`; a leader of -1 is
    /// none. Panics if the metadata cannot be read.
    pub fn partitions(&self, topic: &str) -> Vec<(i32, Vec<i32>)> {
        let consumer: BaseConsumer = client_config(&self.bootstrap)
            .set("log_level", "2")
            .create()
            .expect("metadata client");
        let md = consumer
            .fetch_metadata(Some(topic), Duration::from_secs(10))
            .unwrap_or_else(|e| panic!("metadata of {topic}: {e}"));
        let t = md
            .topics()
            .iter()
            .find(|t| t.name() == topic)
            .unwrap_or_else(|| panic!("{topic} is not in the metadata"));
        let mut parts: Vec<(i32, i32, Vec<i32>)> = t
            .partitions()
            .iter()
            .map(|p| (p.id(), p.leader(), p.isr().to_vec()))
            .collect();
        parts.sort_by_key(|p| p.0);
        parts.into_iter().map(|(_, l, isr)| (l, isr)).collect()
    }

    /// The leader of `topic`'s partition `partition` (panics if it has none).
    pub fn leader(&self, topic: &str, partition: usize) -> i32 {
        let leader = self.partitions(topic)[partition].0;
        assert!(
            (1..=BROKERS).contains(&leader),
            "{topic}/{partition} has no leader ({leader})"
        );
        leader
    }

    /// Waits until every partition of `topics` has a leader other than `not` and, with `full`, all
    /// three replicas in sync; returns the wait. Panics after `timeout`.
    pub fn wait_partitions(
        &self,
        topics: &[&str],
        not: Option<i32>,
        full: bool,
        timeout: Duration,
    ) -> Duration {
        let start = Instant::now();
        loop {
            let ok = topics.iter().all(|t| {
                self.partitions(t).iter().all(|(leader, isr)| {
                    (1..=BROKERS).contains(leader)
                        && Some(*leader) != not
                        && (!full || isr.len() == BROKERS as usize)
                })
            });
            if ok {
                return start.elapsed();
            }
            assert!(
                start.elapsed() < timeout,
                "partitions of {topics:?} not {} within {timeout:?}: {:?}",
                if full {
                    "fully replicated"
                } else {
                    "led by a live broker"
                },
                topics
                    .iter()
                    .map(|t| self.partitions(t))
                    .collect::<Vec<_>>()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// A client context that counts what librdkafka reports of an outage: errors (a broker connection
/// lost or refused is `_TRANSPORT`, all brokers down `_ALL_BROKERS_DOWN`) and, with
/// `statistics.interval.ms` set, changes of a partition's leader in the client's own metadata (a
/// controlled shutdown moves leadership without any error). A client built with it can show it saw
/// the fault.
#[derive(Debug, Clone, Default)]
pub struct FaultWatch {
    inner: Arc<WatchInner>,
}

#[derive(Debug, Default)]
struct WatchInner {
    errors: AtomicU64,
    first: Mutex<Vec<String>>,
    leader_changes: AtomicU64,
    leaders: Mutex<HashMap<(String, i32), i32>>,
}

impl FaultWatch {
    /// Errors reported so far.
    pub fn errors(&self) -> u64 {
        self.inner.errors.load(Ordering::SeqCst)
    }

    /// Leader changes of partitions seen in the client's statistics so far.
    pub fn leader_changes(&self) -> u64 {
        self.inner.leader_changes.load(Ordering::SeqCst)
    }

    /// The first few error texts (for messages).
    pub fn first_errors(&self) -> Vec<String> {
        self.inner
            .first
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

impl ClientContext for FaultWatch {
    fn stats(&self, statistics: Statistics) {
        let mut leaders = self
            .inner
            .leaders
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for (topic, t) in statistics.topics {
            // Partition -1 is librdkafka's internal "unassigned" queue; -1 as leader: none known.
            for (id, p) in t
                .partitions
                .into_iter()
                .filter(|(id, p)| *id >= 0 && p.leader >= 0)
            {
                if let Some(old) = leaders.insert((topic.clone(), id), p.leader)
                    && old != p.leader
                {
                    self.inner.leader_changes.fetch_add(1, Ordering::SeqCst);
                }
            }
        }
    }

    fn error(&self, error: KafkaError, reason: &str) {
        self.inner.errors.fetch_add(1, Ordering::SeqCst);
        let mut first = self
            .inner
            .first
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if first.len() < 8 {
            first.push(format!("{error}: {reason}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bootstrap_lists_compare_as_sets() {
        assert_eq!(
            normalise("127.0.0.1:2, 127.0.0.1:1"),
            normalise("127.0.0.1:1,127.0.0.1:2")
        );
        assert_ne!(
            normalise("127.0.0.1:1"),
            normalise("127.0.0.1:1,127.0.0.1:2")
        );
    }
}
