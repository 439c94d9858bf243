//! A mixed fleet on one topic (issue 35, item 4): a Rust ordering `DkgProducer` and a Java
//! `DkgKafkaProducer` (`tools/java/OrderingProducer.java`) write the scenario's Zipf keys to 12
//! partitions while the assignment switches five times, and four consumer groups read the topic
//! at the same time, each seeing every record:
//!
//! - `java`: Java `DkgKafkaConsumer`s (`tools/java/FleetMembers.java`, one JVM, a thread per
//!   member), a third member joining just before epoch 3: the epoch is published once a member has
//!   revoked partitions for the newcomer (cooperative rebalancing), so the switch starts mid-rebalance;
//! - `python`: Python `dkg_kafka.DkgConsumer`s (`python/tests/fleet_member.py`, a process per
//!   member, from `python/.venv`), a third joining the same way at epoch 4, and one killed with
//!   SIGKILL as the last epoch (6) is published: a crash during a switch, whose partitions the
//!   group takes over only once it notices (`session.timeout.ms`, 6 s), another rebalance before
//!   the group can settle that switch;
//! - `mixed`: a Rust `DkgConsumer` (in this process), a Java `DkgKafkaConsumer` and a Python
//!   `DkgConsumer` in one group: the protocol is the same on the wire (commit metadata, progress on
//!   the handoff topic), and all three use the cooperative-sticky assignor, so they share a classic
//!   group;
//! - `kip848`: a Rust, a Java and a Python member again, in a group of the KIP-848 protocol
//!   (`group.protocol=consumer`: the broker assigns, so there is no client assignor to agree on).
//!
//! Members pace unevenly (a pause every few hundred records), so a moved key's old partition lags
//! behind its new one. Each member prints (or, in Rust, logs) every record it processes with the
//! wall clock in ns; a group's records merged by that clock are its processing order (a moved
//! key's new records are released only after its old ones were processed, printed and committed,
//! so milliseconds separate the two). Per group: 0 per-key order violations (each producer's
//! records of a key in send order, a moved key's old partitions before its new one), 0 records
//! lost, and duplicates only in the crashed member's group, each one a record that member
//! processed after its last commit (counted and printed). The control run is the same fleet with
//! plain consumers (Java `KafkaConsumer`, `confluent_kafka.Consumer`, an rdkafka
//! `StreamConsumer`): every group shows violations, so the check can fail.
//!
//! Prerequisites fail the test, never skip it: `java`/`javac` (the Java sources are compiled here,
//! against `scripts/kafka classpath`) and the virtualenv `python/.venv` with the built wheel
//! installed (`python/scripts/test --venv-only`, which `scripts/test` runs before the Rust tests;
//! `DKG_PY_VENV` moves it).
#![cfg(feature = "kafka")]
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::java::{JavaProducer, Workload};
use common::scenario::{Entry, GroupProtocol, PARTITIONS, Report, Setup, check};
use dkg_kafka::ConsumerHooks;
use rdkafka::Message as _;
use rdkafka::consumer::{Consumer as _, StreamConsumer};
use tokio::sync::watch;

/// Each producer sends at `RATE` until the last switch has happened ([`AFTER_LAST`] later), at
/// most `MAX_PER_PRODUCER` records.
const MAX_PER_PRODUCER: u64 = 200_000;
const RATE: f64 = 1_500.0;
const AFTER_LAST: Duration = Duration::from_millis(1_000);
/// The Rust producer's index in the payloads; the Java one's is 1.
const RUST: u32 = 0;
const JAVA: u32 = 1;
const LAST_EPOCH: u64 = 6;
/// Members join a group and the next epoch is published in the middle of the rebalance (once a
/// member of the group revoked partitions for the newcomer, before the newcomer got them): `j2` the
/// Java group as epoch 3 comes, `p2` the Python group as epoch 4 does ...
const JOINS: [(u64, &str); 2] = [(3, "j2"), (4, "p2")];
/// ... and the Python member `p0` is killed as the last epoch is published.
const KILL_AT: u64 = LAST_EPOCH;
const GROUPS: [&str; 4] = ["java", "python", "mixed", "kip848"];
/// The one group of the KIP-848 protocol; the others are classic.
const KIP848: usize = 3;

/// The `group.protocol` of group `g`.
fn protocol(g: usize) -> &'static str {
    if g == KIP848 { "consumer" } else { "classic" }
}
/// Generous bounds for what takes milliseconds to seconds: only a stuck component reaches them.
const BOUND: Duration = Duration::from_secs(60);

/// Which consumers the fleet runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// The ordering consumers of each language.
    Dkg,
    /// The control: plain consumers, the protocol off.
    Plain,
}

impl Mode {
    fn arg(self) -> &'static str {
        match self {
            Self::Dkg => "dkg",
            Self::Plain => "plain",
        }
    }
}

/// A member: its name, group (index into [`GROUPS`]) and pace (a pause of `pause_ms` every
/// `every` records).
struct Spec {
    name: &'static str,
    group: usize,
    every: u64,
    pause_ms: u64,
}

const PAUSE_MS: u64 = 150;
const MEMBERS: [Spec; 12] = [
    Spec {
        name: "j0",
        group: 0,
        every: 700,
        pause_ms: PAUSE_MS,
    },
    Spec {
        name: "j1",
        group: 0,
        every: 1000,
        pause_ms: PAUSE_MS,
    },
    Spec {
        name: "j2",
        group: 0,
        every: 1300,
        pause_ms: PAUSE_MS,
    },
    Spec {
        name: "p0",
        group: 1,
        every: 700,
        pause_ms: PAUSE_MS,
    },
    Spec {
        name: "p1",
        group: 1,
        every: 1000,
        pause_ms: PAUSE_MS,
    },
    Spec {
        name: "p2",
        group: 1,
        every: 1300,
        pause_ms: PAUSE_MS,
    },
    Spec {
        name: "r0",
        group: 2,
        every: 700,
        pause_ms: PAUSE_MS,
    },
    Spec {
        name: "m0",
        group: 2,
        every: 1000,
        pause_ms: PAUSE_MS,
    },
    // The mixed group's slow member: it falls behind (a pause every 300 records, about a third of its
    // time), so keys moved off its partitions are overtaken in the control run. With the members'
    // paces alone (700-1,300) the plain mixed group kept order in one CI run.
    Spec {
        name: "q0",
        group: 2,
        every: 300,
        pause_ms: PAUSE_MS,
    },
    // The KIP-848 group: the mixed group's members and paces again.
    Spec {
        name: "r1",
        group: KIP848,
        every: 700,
        pause_ms: PAUSE_MS,
    },
    Spec {
        name: "m1",
        group: KIP848,
        every: 1000,
        pause_ms: PAUSE_MS,
    },
    Spec {
        name: "q1",
        group: KIP848,
        every: 300,
        pause_ms: PAUSE_MS,
    },
];
const RUST_MEMBERS: [&str; 2] = ["r0", "r1"];
const JAVA_MEMBERS: [&str; 5] = ["j0", "j1", "j2", "m0", "m1"];
const PYTHON_MEMBERS: [&str; 5] = ["p0", "p1", "p2", "q0", "q1"];
/// The groups of members of all three languages.
const MIXED_GROUPS: [&str; 2] = ["mixed", "kip848"];
const JOINING: [&str; 2] = [JOINS[0].1, JOINS[1].1];
const KILLED: &str = "p0";

fn member_index(name: &str) -> usize {
    MEMBERS
        .iter()
        .position(|m| m.name == name)
        .unwrap_or_else(|| panic!("unknown member {name}"))
}

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

/// One processed record, as a member reported it.
struct Rec {
    ts: u128,
    member: usize,
    key: String,
    producer: u32,
    pseq: u64,
    partition: i32,
    offset: i64,
}

/// What every member reported, shared by the reader threads and the Rust member.
#[derive(Default)]
struct FleetLog {
    records: Vec<Rec>,
    /// Partitions each member owns (assigned minus revoked).
    owned: HashMap<usize, i64>,
    /// Per member, the records it processed since its last commit.
    since_commit: HashMap<usize, HashSet<(u32, u64)>>,
    /// When each member was first assigned partitions (ns).
    first_assigned: HashMap<usize, u128>,
    /// Revocations (a member giving partitions up) per group.
    revocations: HashMap<usize, u64>,
    failures: Vec<String>,
}

type Shared = Arc<Mutex<FleetLog>>;

impl FleetLog {
    fn record(&mut self, ts: u128, member: usize, rest: &[&str]) {
        let [partition, offset, key, value] = rest else {
            panic!("a record line with 4 fields expected: {rest:?}");
        };
        let (p, s) = value.split_once(':').expect("producer:seq value");
        let rec = Rec {
            ts,
            member,
            key: (*key).to_owned(),
            producer: p.parse().unwrap(),
            pseq: s.parse().unwrap(),
            partition: partition.parse().unwrap(),
            offset: offset.parse().unwrap(),
        };
        self.since_commit
            .entry(member)
            .or_default()
            .insert((rec.producer, rec.pseq));
        self.records.push(rec);
    }

    fn owned(&self, group: usize) -> i64 {
        self.owned
            .iter()
            .filter(|(m, _)| MEMBERS[**m].group == group)
            .map(|(_, n)| n)
            .sum()
    }

    /// Distinct (producer, seq) of `group`.
    fn distinct(&self, group: usize) -> HashSet<(u32, u64)> {
        self.records
            .iter()
            .filter(|r| MEMBERS[r.member].group == group)
            .map(|r| (r.producer, r.pseq))
            .collect()
    }

    /// `group`'s records in processing order (by the members' clock; lines of one member keep
    /// their order).
    fn entries(&self, group: usize) -> Vec<Entry> {
        let mut v: Vec<&Rec> = self
            .records
            .iter()
            .filter(|r| MEMBERS[r.member].group == group)
            .collect();
        v.sort_by_key(|r| r.ts);
        v.into_iter()
            .enumerate()
            .map(|(i, r)| Entry {
                seq: i as u64,
                member: r.member,
                key: r.key.clone(),
                producer: r.producer,
                pseq: r.pseq,
                partition: r.partition,
                offset: r.offset,
            })
            .collect()
    }
}

/// Reads a member process's stdout into `log`; "ready", "closed", an error ("e") and the end of
/// the stream go to `events` too.
fn spawn_reader(
    stdout: std::process::ChildStdout,
    log: Shared,
    events: mpsc::Sender<String>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let fields: Vec<&str> = line.split(' ').collect();
            let (Some(ts), Some(kind)) = (fields.first(), fields.get(1)) else {
                continue;
            };
            let ts: u128 = ts
                .parse()
                .unwrap_or_else(|_| panic!("a member's line: {line:?}"));
            match *kind {
                "ready" | "closed" => {
                    let _ = events.send((*kind).to_owned());
                }
                "e" => {
                    log.lock().unwrap().failures.push(line.clone());
                    let _ = events.send(line.clone());
                }
                _ => {
                    let member = member_index(fields[2]);
                    let mut l = log.lock().unwrap();
                    match *kind {
                        "r" => l.record(ts, member, &fields[3..]),
                        "c" => l.since_commit.entry(member).or_default().clear(),
                        "a" => {
                            let n: i64 = fields[3].parse().unwrap();
                            *l.owned.entry(member).or_default() += n;
                            l.first_assigned.entry(member).or_insert(ts);
                        }
                        "v" => {
                            let n: i64 = fields[3].parse().unwrap();
                            *l.owned.entry(member).or_default() -= n;
                            *l.revocations.entry(MEMBERS[member].group).or_default() += 1;
                        }
                        _ => panic!("a member's line: {line:?}"),
                    }
                }
            }
        }
        let _ = events.send("eof".to_owned());
    })
}

/// A member process (the JVM of the Java members, or one Python member).
struct Proc {
    what: String,
    child: Child,
    stdin: ChildStdin,
    events: mpsc::Receiver<String>,
    reader: std::thread::JoinHandle<()>,
}

impl Proc {
    fn spawn(what: &str, mut command: Command, log: &Shared) -> Self {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("start {what}: {e}"));
        let (tx, events) = mpsc::channel();
        let reader = spawn_reader(child.stdout.take().unwrap(), Arc::clone(log), tx);
        Self {
            what: what.to_owned(),
            stdin: child.stdin.take().unwrap(),
            child,
            events,
            reader,
        }
    }

    /// Waits for the event `want` (at most [`BOUND`]).
    fn expect(&self, want: &str) {
        let got = self
            .events
            .recv_timeout(BOUND)
            .unwrap_or_else(|e| panic!("{}: no \"{want}\" within {BOUND:?}: {e}", self.what));
        assert_eq!(got, want, "{}: expected \"{want}\"", self.what);
    }

    fn send(&mut self, command: &str) {
        writeln!(self.stdin, "{command}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// "stop", then waits for "closed" and a clean exit.
    fn stop(mut self) {
        self.send("stop");
        self.expect("closed");
        let status = self.child.wait().unwrap();
        assert!(status.success(), "{} exited with {status}", self.what);
        self.reader.join().unwrap();
    }

    /// SIGKILL; returns once its last line was read.
    fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
        self.reader.join().unwrap();
    }
}

/// The Java programs, compiled once per test binary (one javac run for both).
fn java_classpath() -> String {
    static CP: OnceLock<String> = OnceLock::new();
    CP.get_or_init(|| {
        common::compile_java_programs(
            &[
                "tools/java/OrderingProducer.java",
                "tools/java/FleetMembers.java",
            ],
            Some("java/src/main/java"),
        )
    })
    .clone()
}

/// The Python of the test virtualenv (`python/scripts/test --venv-only` makes it), with
/// `dkg_kafka` installed: missing, the test fails.
fn python() -> PathBuf {
    let venv = std::env::var_os("DKG_PY_VENV")
        .map_or_else(|| common::repo_root().join("python/.venv"), PathBuf::from);
    let python = venv.join("bin/python");
    assert!(
        python.is_file(),
        "{} is missing: the mixed-fleet test runs Python members from the test virtualenv; make it with \
         `python/scripts/test --venv-only` (scripts/test does before the Rust tests)",
        python.display()
    );
    let out = Command::new(&python)
        .args(["-c", "import dkg_kafka, confluent_kafka"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{} cannot import dkg_kafka (`python/scripts/test --venv-only` installs the wheel): {}",
        python.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    python
}

/// Hooks of the Rust member: its partitions counted into the fleet's log.
struct FleetHooks {
    log: Shared,
    member: usize,
}

impl ConsumerHooks for FleetHooks {
    fn on_partitions_assigned(&self, partitions: &[u32]) {
        let mut l = self.log.lock().unwrap();
        *l.owned.entry(self.member).or_default() += partitions.len() as i64;
        l.first_assigned.entry(self.member).or_insert_with(now_ns);
    }
    fn on_partitions_revoked(&self, partitions: &[u32]) {
        *self
            .log
            .lock()
            .unwrap()
            .owned
            .entry(self.member)
            .or_default() -= partitions.len() as i64;
    }
}

/// The Rust member of the `mixed` group: a `DkgConsumer`, or (control) a plain `StreamConsumer`.
enum RustConsumer {
    Dkg(Box<dkg_kafka::DkgConsumer>),
    Plain(StreamConsumer),
}

fn spawn_rust_member(
    name: &'static str,
    consumer: RustConsumer,
    log: Shared,
    mut stop: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    let member = member_index(name);
    let spec = &MEMBERS[member];
    tokio::spawn(async move {
        let mut n = 0_u64;
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        let log_record = |key: Option<&[u8]>, value: Option<&[u8]>, partition: i32, offset: i64| {
            let key = std::str::from_utf8(key.expect("a keyed record")).unwrap();
            let value = std::str::from_utf8(value.expect("a value")).unwrap();
            let (partition, offset) = (partition.to_string(), offset.to_string());
            log.lock().unwrap().record(
                now_ns(),
                member,
                &[partition.as_str(), offset.as_str(), key, value],
            );
        };
        match consumer {
            RustConsumer::Dkg(mut c) => {
                loop {
                    tokio::select! {
                        r = c.recv() => match r {
                            Ok(m) => log_record(m.key(), m.payload(), m.partition(), m.offset()),
                            Err(e) => panic!("{name}: {e}"),
                        },
                        _ = stop.changed() => break,
                    }
                    n += 1;
                    if n.is_multiple_of(spec.every) {
                        tokio::time::sleep(Duration::from_millis(spec.pause_ms)).await;
                    }
                }
                c.close()
                    .await
                    .unwrap_or_else(|e| panic!("{name}: close: {e}"));
            }
            RustConsumer::Plain(c) => {
                loop {
                    tokio::select! {
                        r = c.recv() => {
                            let m = r.unwrap_or_else(|e| panic!("{name} (plain): {e}"));
                            log_record(m.key(), m.payload(), m.partition(), m.offset());
                            n += 1;
                            if n.is_multiple_of(spec.every) {
                                tokio::time::sleep(Duration::from_millis(spec.pause_ms)).await;
                            }
                        }
                        _ = tick.tick() => {
                            // A plain consumer has no hooks here: its share of the group from its assignment.
                            let owned = c.assignment().map_or(0, |a| a.count()) as i64;
                            log.lock().unwrap().owned.insert(member, owned);
                        }
                        _ = stop.changed() => break,
                    }
                }
            }
        }
    })
}

/// The epoch each of `groups` has settled on the topic: the lowest drained value its members
/// announced over the partitions (`progress/<group>/<topic>/<p>` on the handoff topic, 0 without).
async fn settled(setup: &Setup, groups: &[String]) -> Vec<u64> {
    let mut drained = vec![vec![0_u64; PARTITIONS as usize]; groups.len()];
    for (key, value) in setup.handoff_log().await {
        let Some(value) = value else { continue };
        for (g, group) in groups.iter().enumerate() {
            let prefix = format!("progress/{group}/{}/", setup.topic);
            if let Some(p) = key.strip_prefix(&prefix) {
                let v: serde_json::Value = serde_json::from_slice(&value).unwrap();
                drained[g][p.parse::<usize>().unwrap()] = v["drained"].as_u64().unwrap();
            }
        }
    }
    drained
        .into_iter()
        .map(|d| d.into_iter().min().unwrap())
        .collect()
}

/// Waits until every one of `groups` has settled `epoch` (at most [`BOUND`]).
async fn wait_settled(setup: &Setup, groups: &[String], epoch: u64) {
    let start = Instant::now();
    loop {
        let s = settled(setup, groups).await;
        if s.iter().all(|&e| e >= epoch) {
            return;
        }
        assert!(
            start.elapsed() < BOUND,
            "groups {groups:?} settled {s:?}, not {epoch}, within {BOUND:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The outcome of one fleet run, per group.
struct Outcome {
    reports: Vec<Report>,
    records: Vec<usize>,
    /// The killed member's records processed after its last commit.
    after_last_commit: HashSet<(u32, u64)>,
    /// Records of the killed member's group processed more than once, and whether each is one of
    /// those.
    duplicated: Vec<((u32, u64), usize)>,
    elapsed: Duration,
}

async fn run_fleet(mode: Mode) -> Outcome {
    let _serial = common::scenario::one_at_a_time().await;
    let started = Instant::now();
    let setup = Setup::new(&format!("fleet-{}", mode.arg())).await;
    let admin: rdkafka::admin::AdminClient<rdkafka::client::DefaultClientContext> =
        common::producer::client_config(&setup.bootstrap)
            .create()
            .unwrap();
    dkg_kafka::kafka::handoff::ensure_handoff_topic(&admin, &setup.handoff, 1)
        .await
        .unwrap();
    let group = |g: usize| format!("{}-{}", setup.group, GROUPS[g]);
    let log: Shared = Arc::default();
    // The Rust default: on a starved machine a short lease can lapse between renewals, and a live
    // producer then looks dead (spec 9.4, "Producer crash"). The producers close cleanly 1 s after the
    // last switch while the killed member's partitions wait for the group to notice the crash
    // (session.timeout.ms, 6 s); a closed lease stays awaited after it expires (spec 9.1), so the new
    // owner passes the closed producers' markers before it counts those partitions drained (before
    // that rule, a 3 s lease let a moved key's new records overtake its old ones here).
    let lease = Duration::from_secs(30);

    eprintln!("{}: setup at {:?}", mode.arg(), started.elapsed());
    // Everything that takes its time to start first, side by side: the JVMs and the Pythons.
    let (cp, python) = tokio::task::block_in_place(|| (java_classpath(), python()));
    let workload = Workload {
        idx: JAVA,
        count: MAX_PER_PRODUCER,
        rate: RATE,
        lease,
        last_epoch: LAST_EPOCH,
    };
    let java_producer = {
        let (cp, setup_ref) = (cp.clone(), &setup);
        std::thread::scope(|s| {
            let producer = s.spawn(move || JavaProducer::start_with(&cp, setup_ref, workload));
            let mut java = Command::new(common::java_bin("java"));
            java.arg("-cp")
                .arg(java_classpath())
                .arg("FleetMembers")
                .args([
                    setup.bootstrap.as_str(),
                    setup.topic.as_str(),
                    setup.control.as_str(),
                    setup.handoff.as_str(),
                    mode.arg(),
                ]);
            for name in JAVA_MEMBERS {
                let m = &MEMBERS[member_index(name)];
                java.arg(format!(
                    "{}:{}:{}:{}:{}",
                    m.name,
                    group(m.group),
                    m.every,
                    m.pause_ms,
                    protocol(m.group)
                ));
            }
            let members = Proc::spawn("the Java members", java, &log);
            (producer.join().unwrap(), members)
        })
    };
    let (mut java_producer, mut java_members) = java_producer;
    let mut pythons: HashMap<&str, Proc> = PYTHON_MEMBERS
        .iter()
        .map(|&name| {
            let m = &MEMBERS[member_index(name)];
            let mut py = Command::new(&python);
            py.current_dir(common::repo_root())
                .arg("python/tests/fleet_member.py")
                .args([
                    setup.bootstrap.as_str(),
                    setup.topic.as_str(),
                    setup.control.as_str(),
                    setup.handoff.as_str(),
                    group(m.group).as_str(),
                    name,
                    mode.arg(),
                    &m.every.to_string(),
                    &m.pause_ms.to_string(),
                    protocol(m.group),
                ]);
            (
                name,
                Proc::spawn(&format!("Python member {name}"), py, &log),
            )
        })
        .collect();
    tokio::task::block_in_place(|| {
        java_members.expect("ready");
        for p in pythons.values() {
            p.expect("ready");
        }
    });

    eprintln!("{}: members ready at {:?}", mode.arg(), started.elapsed());
    // The Rust members of the mixed groups.
    let registry = prometheus::Registry::new();
    let (stop_member, stop_rx) = watch::channel(false);
    let mut rust_tasks = Vec::new();
    for name in RUST_MEMBERS {
        let member = member_index(name);
        let g = MEMBERS[member].group;
        let consumer = match mode {
            Mode::Dkg => {
                let hooks = FleetHooks {
                    log: Arc::clone(&log),
                    member,
                };
                let protocol = if g == KIP848 {
                    GroupProtocol::Consumer
                } else {
                    GroupProtocol::Classic
                };
                RustConsumer::Dkg(Box::new(
                    setup
                        .consumer_with_protocol(&group(g), name, &registry, hooks, protocol)
                        .await,
                ))
            }
            Mode::Plain => {
                let mut config = common::producer::client_config(&setup.bootstrap);
                config
                    .set("group.id", group(g))
                    .set("auto.offset.reset", "earliest");
                if g == KIP848 {
                    config.set("group.protocol", "consumer");
                } else {
                    config
                        .set("partition.assignment.strategy", "cooperative-sticky")
                        .set("session.timeout.ms", "6000")
                        .set("heartbeat.interval.ms", "500");
                }
                let c: StreamConsumer = config.create().unwrap();
                c.subscribe(&[setup.topic.as_str()]).unwrap();
                RustConsumer::Plain(c)
            }
        };
        rust_tasks.push(spawn_rust_member(
            name,
            consumer,
            Arc::clone(&log),
            stop_rx.clone(),
        ));
    }

    // The initial members join; records flow once every group owns every partition.
    for name in JAVA_MEMBERS.iter().filter(|n| !JOINING.contains(n)) {
        java_members.send(&format!("start {name}"));
    }
    for (name, p) in pythons.iter_mut() {
        if !JOINING.contains(name) {
            p.send("go");
        }
    }
    let wait_start = Instant::now();
    loop {
        let (owned, failures) = {
            let l = log.lock().unwrap();
            let owned: Vec<i64> = (0..GROUPS.len()).map(|g| l.owned(g)).collect();
            (owned, l.failures.clone())
        };
        assert!(failures.is_empty(), "a member failed: {failures:?}");
        if owned.iter().all(|&n| n == i64::from(PARTITIONS)) {
            break;
        }
        assert!(
            wait_start.elapsed() < BOUND,
            "the groups own {owned:?} of {PARTITIONS} partitions after {BOUND:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    eprintln!("{}: groups formed at {:?}", mode.arg(), started.elapsed());
    // Both producers start together; the switches come a second apart (pacing the scenario, not
    // a timing check), members join mid-switch (JOINS) and one is killed as KILL_AT is published.
    let (stop_tx, stop) = watch::channel(false);
    let (producers, tasks) = setup
        .start_producers(1, lease, MAX_PER_PRODUCER, RATE, &stop)
        .await;
    java_producer.go();
    let mut published_at: HashMap<u64, u128> = HashMap::new();
    for epoch in 2..=LAST_EPOCH {
        let pace = tokio::time::sleep(Duration::from_millis(1_000));
        if mode == Mode::Dkg && epoch > 2 {
            // The protocol's condition for a group to stay followed by the producers' stamp windows
            // (spec 9.2.2): it settled the previous switch before the next epoch's window can close.
            // Met at once on an idle machine; waited for here so that a slow one cannot break it.
            let groups: Vec<String> = (0..GROUPS.len()).map(group).collect();
            wait_settled(&setup, &groups, epoch - 1).await;
        }
        pace.await;
        if let Some(&(_, name)) = JOINS.iter().find(|(e, _)| *e == epoch) {
            let g = MEMBERS[member_index(name)].group;
            let revoked = |log: &Shared| log.lock().unwrap().revocations.get(&g).copied();
            let before = revoked(&log);
            if JAVA_MEMBERS.contains(&name) {
                java_members.send(&format!("start {name}"));
            } else {
                pythons.get_mut(name).unwrap().send("go");
            }
            let start = Instant::now();
            while revoked(&log) == before {
                assert!(
                    start.elapsed() < BOUND,
                    "no member of group {} revoked partitions for {name} within {BOUND:?}",
                    GROUPS[g]
                );
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
        setup.publish(epoch).await;
        published_at.insert(epoch, now_ns());
        if epoch == KILL_AT {
            let killed = pythons.remove(KILLED).unwrap();
            tokio::task::block_in_place(|| killed.kill());
        }
    }
    eprintln!(
        "{}: switches published at {:?}",
        mode.arg(),
        started.elapsed()
    );
    // Records still flow at the last switch and the crash, whatever the machine's pace was.
    tokio::time::sleep(AFTER_LAST).await;
    stop_tx.send(true).unwrap();
    java_producer.stop();
    let mut sent = Vec::new();
    for t in tasks {
        sent.extend(t.await.unwrap());
    }
    for p in &producers {
        p.close().await.unwrap();
    }
    let java_sent = tokio::task::spawn_blocking(move || java_producer.finish())
        .await
        .unwrap();
    sent.extend(java_sent);
    assert!(
        sent.iter().any(|s| s.producer == RUST) && sent.iter().any(|s| s.producer == JAVA),
        "both producers' records"
    );

    eprintln!("{}: producers done at {:?}", mode.arg(), started.elapsed());
    // Every group sees every acknowledged record (or a stuck group fails the test).
    let want: HashSet<(u32, u64)> = sent.iter().map(|s| (s.producer, s.pseq)).collect();
    let wait_start = Instant::now();
    loop {
        let (missing, failures) = {
            let l = log.lock().unwrap();
            let missing: Vec<usize> = (0..GROUPS.len())
                .map(|g| want.difference(&l.distinct(g)).count())
                .collect();
            (missing, l.failures.clone())
        };
        assert!(failures.is_empty(), "a member failed: {failures:?}");
        if missing.iter().all(|&m| m == 0) {
            break;
        }
        assert!(
            wait_start.elapsed() < BOUND,
            "records never processed, per group {GROUPS:?}: {missing:?} of {} after {BOUND:?}",
            want.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    eprintln!("{}: all processed at {:?}", mode.arg(), started.elapsed());
    // Clean ends: final commits, the groups left.
    stop_member.send(true).unwrap();
    for (name, task) in RUST_MEMBERS.iter().zip(rust_tasks) {
        tokio::time::timeout(BOUND, task)
            .await
            .unwrap_or_else(|_| panic!("{name} stops in time"))
            .unwrap_or_else(|e| panic!("{name}'s task: {e}"));
    }
    tokio::task::block_in_place(|| {
        java_members.stop();
        for (_, p) in pythons.drain() {
            p.stop();
        }
    });

    eprintln!("{}: members closed at {:?}", mode.arg(), started.elapsed());
    let l = log.lock().unwrap();
    let killed = member_index(KILLED);
    let after_last_commit = l.since_commit.get(&killed).cloned().unwrap_or_default();
    let mut reports = Vec::new();
    let mut records = Vec::new();
    let mut duplicated = Vec::new();
    // Every group's processing log, for a look after a failure: member, key, producer, seq, partition, offset.
    let dump = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "mixed-fleet-{}-{}.tsv",
        mode.arg(),
        std::process::id()
    ));
    let mut text = String::new();
    for (g, name) in GROUPS.iter().enumerate() {
        for e in l.entries(g) {
            text.push_str(&format!(
                "{}\t{}\t{}\t{}\t{}\t{}\t{}\n",
                name, MEMBERS[e.member].name, e.key, e.producer, e.pseq, e.partition, e.offset
            ));
        }
    }
    std::fs::write(&dump, text).unwrap();
    eprintln!("{}: processing logs in {}", mode.arg(), dump.display());
    for (g, name) in GROUPS.iter().enumerate() {
        let entries = l.entries(g);
        let report = check(&sent, &entries, &setup.topic, &[RUST, JAVA]);
        eprintln!(
            "{} group {:>6}: records {} duplicates {} lost {} order violations {} residence violations {} \
             misplaced {} moved keys {}",
            mode.arg(),
            name,
            entries.len(),
            report.duplicates,
            report.lost,
            report.order_violations.len(),
            report.residence_violations.len(),
            report.misplaced,
            report.moved_keys
        );
        let mut times: HashMap<(u32, u64), usize> = HashMap::new();
        for e in &entries {
            *times.entry((e.producer, e.pseq)).or_default() += 1;
        }
        duplicated.extend(times.into_iter().filter(|(_, n)| *n > 1));
        records.push(entries.len());
        reports.push(report);
    }
    // The mixed groups are mixed: each of their members (Rust, Java, Python) processed records.
    for mixed in MIXED_GROUPS {
        let per_member: Vec<(&str, usize)> = MEMBERS
            .iter()
            .enumerate()
            .filter(|(_, m)| GROUPS[m.group] == mixed)
            .map(|(i, m)| (m.name, l.records.iter().filter(|r| r.member == i).count()))
            .collect();
        eprintln!(
            "{}: {mixed} group, records per member {per_member:?}",
            mode.arg()
        );
        assert!(
            per_member.iter().all(|&(_, n)| n > 0),
            "every member of the {mixed} group processed records: {per_member:?}"
        );
    }
    for (epoch, name) in JOINS {
        let m = member_index(name);
        let at = l.first_assigned.get(&m).copied().unwrap_or(0);
        let published = published_at[&epoch];
        eprintln!(
            "{} {name}: epoch {epoch} published mid-rebalance; {name} got its first partitions {} ms later",
            mode.arg(),
            (i128::try_from(at).unwrap() - i128::try_from(published).unwrap()) / 1_000_000
        );
    }
    Outcome {
        reports,
        records,
        after_last_commit,
        duplicated,
        elapsed: started.elapsed(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn java_python_and_mixed_groups_keep_each_keys_order_across_five_switches() {
    let out = run_fleet(Mode::Dkg).await;
    for (g, report) in out.reports.iter().enumerate() {
        eprintln!("dkg group {}:", GROUPS[g]);
        report.assert_holds(out.records[g]);
    }
    let python = GROUPS.iter().position(|g| *g == "python").unwrap();
    for (g, report) in out.reports.iter().enumerate().filter(|&(g, _)| g != python) {
        assert_eq!(
            report.duplicates, 0,
            "{}: no crash, no duplicates",
            GROUPS[g]
        );
    }
    // Duplicates only in the killed member's group, each a record it processed after its last
    // commit, processed at most twice.
    let unexpected: Vec<_> = out
        .duplicated
        .iter()
        .filter(|(r, n)| *n > 2 || !out.after_last_commit.contains(r))
        .collect();
    eprintln!(
        "dkg: the killed member {KILLED} processed {} records after its last commit; its group processed \
         {} records twice ({} of them outside those); wall time {:?}",
        out.after_last_commit.len(),
        out.reports[python].duplicates,
        unexpected.len(),
        out.elapsed
    );
    assert!(
        unexpected.is_empty(),
        "duplicates beyond the killed member's records after its last commit: {:?}",
        &unexpected[..unexpected.len().min(10)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn control_the_same_fleet_with_plain_consumers_breaks_key_order() {
    let out = run_fleet(Mode::Plain).await;
    let violations: Vec<usize> = out
        .reports
        .iter()
        .map(|r| r.order_violations.len() + r.residence_violations.len())
        .collect();
    eprintln!(
        "plain: violations per group {GROUPS:?}: {violations:?}; lost {:?}; wall time {:?}",
        out.reports.iter().map(|r| r.lost).collect::<Vec<_>>(),
        out.elapsed
    );
    assert!(
        violations.iter().all(|&v| v > 0),
        "the control (plain consumers) kept order in a group: {GROUPS:?} {violations:?}: the fleet \
         scenario proves nothing there"
    );
}
