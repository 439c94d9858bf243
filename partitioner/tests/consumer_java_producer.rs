//! Java and Rust ordering producers on one topic (`docs/spec.md` 9.2.1): the Java plug-in's
//! `DkgKafkaProducer` (run as `tools/java/OrderingProducer.java`, compiled against the plug-in's
//! sources) and a Rust `DkgProducer` write the scenario's Zipf keys to 12
//! partitions while three `DkgConsumer` members consume and five epoch switches move the hot
//! keys. The assertions of the other ordering tests hold for both producers: nothing lost or
//! duplicated, each producer's records of a key in send order, a moved key's old partitions
//! before its new one. A plain reader of the data topic sees only the application's records (no
//! header but the stamps), and the Java producer wrote its lease and its marker of
//! the last epoch to the handoff topic.
//!
//! Missing java/javac fail the test; it never skips.
#![cfg(feature = "kafka")]
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::scenario::{
    End, Log, Sent, Setup, check, finish_producers, hold_histogram, wait_for_all,
};
use tokio::sync::watch;

const PER_PRODUCER: u64 = 15_000;
const RATE: f64 = 2_500.0;
/// The Rust producer's index in the payloads and the check; the Java one's is 1.
const RUST: u32 = 0;
const JAVA: u32 = 1;
/// The last epoch published; the Java producer closes once it has adopted it.
const LAST_EPOCH: u64 = 6;

/// The Java producer process: its id (from its "ready" line) and where its acknowledged records go.
struct JavaProducer {
    child: Child,
    id: String,
    out: std::path::PathBuf,
    stdout: BufReader<std::process::ChildStdout>,
    stdin: std::process::ChildStdin,
}

impl JavaProducer {
    /// Compiles and starts `OrderingProducer`; returns once it is constructed (its control topic
    /// read, its lease written), at most 60 s. It sends nothing before [`JavaProducer::go`].
    fn start(setup: &Setup, lease: Duration) -> Self {
        let cp = common::compile_java(
            "tools/java/OrderingProducer.java",
            Some("java/src/main/java"),
        );
        let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
            "java-producer-{}-{}.txt",
            setup.topic,
            std::process::id()
        ));
        let mut child = Command::new(common::java_bin("java"))
            .arg("-cp")
            .arg(&cp)
            .arg("OrderingProducer")
            .args([
                setup.bootstrap.as_str(),
                setup.topic.as_str(),
                setup.control.as_str(),
                setup.handoff.as_str(),
                &JAVA.to_string(),
                &PER_PRODUCER.to_string(),
                &RATE.to_string(),
                &lease.as_millis().to_string(),
            ])
            .arg(&out)
            .arg(LAST_EPOCH.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the Java producer");
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let stdin = child.stdin.take().unwrap();
        let started = Instant::now();
        let mut line = String::new();
        stdout
            .read_line(&mut line)
            .expect("the Java producer's first line");
        let id = line
            .trim()
            .strip_prefix("ready ")
            .unwrap_or_else(|| panic!("the Java producer did not start: {line:?}"))
            .to_owned();
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the Java producer took {:?} to start",
            started.elapsed()
        );
        Self {
            child,
            id,
            out,
            stdout,
            stdin,
        }
    }

    /// Starts its sends: with the Rust producer's, so that both producers' records span the five
    /// switches whatever the JVM's start-up took (a Java run of sends over before epoch 2 was
    /// published left hot keys with one home).
    fn go(&mut self) {
        use std::io::Write;
        self.stdin.write_all(b"go\n").unwrap();
        self.stdin.flush().unwrap();
    }

    /// Waits for the process to end (it closes its producer: markers, closed leases) and returns
    /// the acknowledged records in send order.
    fn finish(mut self) -> Vec<Sent> {
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        let status = self.child.wait().unwrap();
        assert!(status.success(), "the Java producer failed: {status}");
        assert!(
            line.starts_with("done "),
            "the Java producer's last line: {line:?}"
        );
        let text = std::fs::read_to_string(&self.out).unwrap();
        text.lines()
            .map(|l| {
                let mut f = l.split(' ');
                let pseq = f.next().unwrap().parse().unwrap();
                let key = f.next().unwrap().to_owned();
                let partition = f.next().unwrap().parse().unwrap();
                Sent {
                    producer: JAVA,
                    pseq,
                    key,
                    partition,
                }
            })
            .collect()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn java_and_rust_ordering_producers_keep_each_keys_order_across_five_switches() {
    let setup = Setup::new("java-fleet").await;
    let log = Arc::new(Log::default());
    let registry = prometheus::Registry::new();
    let (_hooks, members) = setup
        .paced_members(3, &log, &registry, Duration::from_secs(30))
        .await;

    let lease = Duration::from_secs(3);
    let mut java = tokio::task::block_in_place(|| JavaProducer::start(&setup, lease));
    let (stop_tx, stop) = watch::channel(false);
    let (producers, tasks) = setup
        .start_producers(1, lease, PER_PRODUCER, RATE, &stop)
        .await;
    java.go();
    for epoch in 2..=LAST_EPOCH {
        tokio::time::sleep(Duration::from_millis(1_000)).await;
        setup.publish(epoch).await;
    }
    let mut sent = finish_producers(tasks, stop_tx, &producers, PER_PRODUCER).await;
    let java_id = java.id.clone();
    let java_sent = tokio::task::spawn_blocking(move || java.finish())
        .await
        .unwrap();
    assert_eq!(
        java_sent.len() as u64,
        PER_PRODUCER,
        "every Java send acknowledged"
    );
    sent.extend(java_sent);

    wait_for_all(&log, &sent, Duration::from_secs(60)).await;
    for m in members {
        m.stop(End::Close).await;
    }
    let entries = log.entries();
    let report = check(&sent, &entries, &setup.topic, &[RUST, JAVA]);
    report.assert_holds(entries.len());
    assert_eq!(report.duplicates, 0, "no crash, no duplicates");
    let (held, _) = hold_histogram(&[&registry], 2.0);
    assert!(held > 0, "moved keys' records were held at some switch");
    // The Java producer followed every switch: its records of the hot keys (moved by every epoch)
    // came from more than one home.
    let mut homes: std::collections::HashMap<&str, std::collections::HashSet<i32>> =
        std::collections::HashMap::new();
    for e in entries.iter().filter(|e| e.producer == JAVA) {
        homes.entry(e.key.as_str()).or_default().insert(e.partition);
    }
    let hot_homes: Vec<(String, Option<&std::collections::HashSet<i32>>)> = (1
        ..=common::scenario::HOT)
        .map(|r| {
            let key = common::scenario::key(r);
            let h = homes.get(key.as_str());
            (key, h)
        })
        .collect();
    assert!(
        hot_homes
            .iter()
            .all(|(_, h)| h.is_some_and(|h| h.len() > 1)),
        "the Java producer's hot keys moved with the epochs: {hot_homes:?}"
    );

    // Nothing in the data topic but what the two applications sent, and no header but stamps.
    let plain = setup.read_plain(sent.len()).await;
    plain.assert_only_application_records(&sent);
    assert!(
        plain.stamped > 0,
        "moved keys' records are stamped inside the windows"
    );
    // The Java producer announced the last switch with a marker and holds a lease.
    let (markers, marker_leases) = setup.read_markers().await;
    assert_eq!(
        markers.get(&java_id),
        Some(&LAST_EPOCH),
        "the Java producer's marker of the last epoch"
    );
    assert!(marker_leases.contains(&java_id), "its lease2/ record");
    let rust_id = producers[0].producer_id().unwrap().as_str().to_owned();
    assert_eq!(markers.get(&rust_id), Some(&LAST_EPOCH));
}
