//! The Java ordering producer of the mixed-producer tests: `tools/java/OrderingProducer.java`
//! (the plug-in's `DkgKafkaProducer`), compiled at test time against the plug-in's sources and run
//! as a process (`consumer_java_producer`, `consumer_mixed_fleet`).
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use super::scenario::{Sent, Setup};

/// What the Java producer sends: the scenario's Zipf keys, `count` records at `rate` per second,
/// payloads `"<idx>:<seq>"`; it closes once it has adopted `last_epoch`.
#[derive(Clone, Copy, Debug)]
pub struct Workload {
    pub idx: u32,
    pub count: u64,
    pub rate: f64,
    pub lease: Duration,
    pub last_epoch: u64,
}

/// The Java producer process: its id (from its "ready" line) and where its acknowledged records go.
pub struct JavaProducer {
    child: Child,
    pub id: String,
    idx: u32,
    out: PathBuf,
    stdout: BufReader<ChildStdout>,
    stdin: ChildStdin,
}

impl JavaProducer {
    /// Compiles and starts `OrderingProducer`; returns once it is constructed (its control topic
    /// read, its lease written), at most 60 s. It sends nothing before [`JavaProducer::go`].
    pub fn start(setup: &Setup, workload: Workload) -> Self {
        let cp = super::compile_java(
            "tools/java/OrderingProducer.java",
            Some("java/src/main/java"),
        );
        Self::start_with(&cp, setup, workload)
    }

    /// [`JavaProducer::start`] with `OrderingProducer` already compiled into the classpath `cp`.
    pub fn start_with(cp: &str, setup: &Setup, w: Workload) -> Self {
        let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
            "java-producer-{}-{}.txt",
            setup.topic,
            std::process::id()
        ));
        let mut child = Command::new(super::java_bin("java"))
            .arg("-cp")
            .arg(cp)
            .arg("OrderingProducer")
            .args([
                setup.bootstrap.as_str(),
                setup.topic.as_str(),
                setup.control.as_str(),
                setup.handoff.as_str(),
                &w.idx.to_string(),
                &w.count.to_string(),
                &w.rate.to_string(),
                &w.lease.as_millis().to_string(),
            ])
            .arg(&out)
            .arg(w.last_epoch.to_string())
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
            idx: w.idx,
            out,
            stdout,
            stdin,
        }
    }

    /// Starts its sends: with the Rust producer's, so that both producers' records span the five
    /// switches whatever the JVM's start-up took (a Java run of sends over before epoch 2 was
    /// published left hot keys with one home).
    pub fn go(&mut self) {
        self.stdin.write_all(b"go\n").unwrap();
        self.stdin.flush().unwrap();
    }

    /// Ends its sends before `count` (it then waits for the last epoch and closes, as after its
    /// last send).
    pub fn stop(&mut self) {
        self.stdin.write_all(b"stop\n").unwrap();
        self.stdin.flush().unwrap();
    }

    /// Waits for the process to end (it closes its producer: markers, closed leases) and returns
    /// the acknowledged records in send order.
    pub fn finish(mut self) -> Vec<Sent> {
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
                    producer: self.idx,
                    pseq,
                    key,
                    partition,
                }
            })
            .collect()
    }
}
