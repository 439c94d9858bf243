//! The conformance traces of the consumer rules (`spec/traces/`, see its README), checked two ways:
//!
//! 1. The committed files are exactly what the generator (`examples/conformance_traces`) writes,
//!    one at least per rule C1-C19, so nobody edits a trace by hand and no change of the consumer's
//!    behaviour goes unnoticed.
//! 2. Every committed file is replayed through [`Replayer`], a driver written from the README's
//!    "How to replay" alone: it decodes the wire inputs with this crate's codecs, feeds the state
//!    machine and compares each step's outputs. It is the path a Java or Python replayer copies.
#![allow(clippy::unwrap_used)]

#[path = "../examples/conformance_traces/driver.rs"]
#[allow(dead_code)]
mod driver;
#[path = "../examples/conformance_traces/scenarios/mod.rs"]
mod scenarios;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::{Value, json};

use dkg_kafka_core::assignment::Assignment;
use dkg_kafka_core::hash::kafka_partition;
use dkg_kafka_protocol::book::{AssignmentBook, ControlUpdate};
use dkg_kafka_protocol::consumer::core::{Core, CoreConfig, Incoming, Outcome};
use dkg_kafka_protocol::consumer::progress::CommitMeta;
use dkg_kafka_protocol::handoff::{self, HandoffEntry, HandoffKey, MarkerReject, Progress};
use dkg_kafka_protocol::headers;

const REGENERATE: &str = "regenerate with `cargo run -p dkg-kafka-protocol --example conformance_traces -- spec/traces` \
     and review the diff: a change of the consumer's behaviour is a change of docs/spec.md 9.3";

fn traces_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../spec/traces")
}

fn committed_files() -> BTreeMap<String, String> {
    std::fs::read_dir(traces_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&p).unwrap())
        })
        .collect()
}

#[test]
fn committed_traces_are_what_the_generator_writes() {
    let generated: BTreeMap<String, String> = scenarios::all()
        .into_iter()
        .map(|t| (format!("{}.json", t.name), t.to_json()))
        .collect();
    let committed = committed_files();
    let names = |m: &BTreeMap<String, String>| m.keys().cloned().collect::<BTreeSet<_>>();
    assert_eq!(names(&committed), names(&generated), "{REGENERATE}");
    for (name, text) in &generated {
        assert!(committed[name] == *text, "{name} differs; {REGENERATE}");
    }
    for rule in 1..=19 {
        let prefix = format!("C{rule:02}-");
        assert!(
            generated.keys().any(|n| n.starts_with(&prefix)),
            "no trace of rule C{rule}"
        );
    }
}

#[test]
fn every_committed_trace_replays() {
    let files = committed_files();
    assert!(files.len() >= 19, "{} traces", files.len());
    for (name, text) in &files {
        let trace: Value = serde_json::from_str(text).unwrap();
        assert_eq!(
            trace["name"]
                .as_str()
                .map(|n| format!("{n}.json"))
                .as_deref(),
            Some(name.as_str())
        );
        if let Err(e) = Replayer::replay(&trace) {
            panic!("{name}: {e}");
        }
    }
}

// ------------------------------------------------------------------------------ the replayer

/// A record the member may hand out later: partition, offset, split label.
type Rec = (u32, i64, Option<u32>);

fn b64(s: &Value) -> Vec<u8> {
    B64.decode(s.as_str().unwrap()).unwrap()
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap()
}

fn part(v: &Value) -> u32 {
    u32::try_from(u(v)).unwrap()
}

/// One consumer group member and the glue around it, as the README's "How to replay" says.
struct Replayer {
    topic: String,
    partitions: u32,
    keys: Vec<Vec<u8>>,
    core: Core<Rec>,
    book: AssignmentBook,
    /// The key of every record fetched, by (partition, offset): `delivered` compares per key.
    key_at: HashMap<(u32, i64), Option<Vec<u8>>>,
}

/// The outputs of one step, in the file's terms.
#[derive(Default)]
struct Actual {
    delivered: Vec<Value>,
    skipped: Vec<Value>,
    effects: Vec<Value>,
}

impl Replayer {
    fn replay(trace: &Value) -> Result<(), String> {
        let cfg = &trace["config"];
        let ms = |f: &str| Duration::from_millis(u(&cfg[f]));
        let topic = cfg["topic"].as_str().unwrap().to_owned();
        let partitions = part(&cfg["partitions"]);
        let mut core = Core::new(
            &topic,
            cfg["group"].as_str().unwrap(),
            partitions,
            CoreConfig {
                max_held: usize::try_from(u(&cfg["max_held"])).unwrap(),
                stall_timeout: ms("stall_timeout_ms"),
                max_metadata_bytes: usize::try_from(u(&cfg["max_metadata_bytes"])).unwrap(),
                history: usize::try_from(u(&cfg["history"])).unwrap(),
                unknown_epoch_wait: ms("unknown_epoch_wait_ms"),
                max_lease: ms("max_lease_ms"),
            },
        );
        core.tick(Duration::ZERO, u(&cfg["now_ms"]));
        let mut r = Replayer {
            topic,
            partitions,
            keys: trace["keys_b64"]
                .as_array()
                .unwrap()
                .iter()
                .map(b64)
                .collect(),
            core,
            book: AssignmentBook::new(),
            key_at: HashMap::new(),
        };
        for (i, step) in trace["steps"].as_array().unwrap().iter().enumerate() {
            let t = Duration::from_millis(u(&step["t_ms"]));
            let (kind, input) = step["in"].as_object().unwrap().iter().next().unwrap();
            let actual = r.step(t, kind, input);
            r.compare(&actual, &step["out"])
                .map_err(|e| format!("step {i} ({kind}): {e}"))?;
        }
        Ok(())
    }

    fn step(&mut self, t: Duration, kind: &str, input: &Value) -> Actual {
        let mut out = Actual::default();
        match kind {
            "control" => {
                let value = input["value"].as_str().map(str::as_bytes);
                let update = self
                    .book
                    .apply(Some(input["key"].as_str().unwrap().as_bytes()), value);
                if let ControlUpdate::Adopted(a) = update
                    && a.topic() == self.topic
                {
                    self.core.on_assignment(a, t);
                }
                self.split_hooks(&mut out);
            }
            "handoff" => {
                let key = input["key"].as_str().unwrap().as_bytes();
                let value = input["value"].as_str().map(str::as_bytes);
                if let Ok(entry) = handoff::decode(Some(key), value)
                    && entry.topic() == self.topic
                {
                    match entry {
                        HandoffEntry::Lease(l) => self.core.on_lease(l, t),
                        HandoffEntry::Marker(m) => self.core.on_marker(m, t),
                        HandoffEntry::MarkerRejected { reason, .. } => {
                            self.core.on_marker_rejected(reason);
                        }
                        HandoffEntry::History(a) => self.core.on_assignment(a, t),
                        HandoffEntry::Progress(p) => self.core.on_progress(&p, t),
                        HandoffEntry::Removed(HandoffKey::Lease { producer, .. }) => {
                            self.core.on_lease_removed(&producer, t);
                        }
                        HandoffEntry::Removed(_) => {}
                    }
                }
                self.split_hooks(&mut out);
            }
            "assign" => {
                let mut ps = Vec::new();
                for a in input.as_array().unwrap() {
                    let p = part(&a["partition"]);
                    let meta =
                        CommitMeta::parse(a["metadata"].as_str().unwrap()).and_then(Result::ok);
                    self.core.assign(p, a["offset"].as_i64(), meta.as_ref(), t);
                    ps.push(p);
                }
                out.effects.push(json!({"hook": {"assigned": ps}}));
                for p in ps {
                    let r = self.core.initial_progress(p).unwrap();
                    out.effects.push(announcement(&r));
                }
            }
            "revoke" => {
                let ps: Vec<u32> = input.as_array().unwrap().iter().map(part).collect();
                out.effects.push(json!({"hook": {"revoked": ps}}));
                let (mut commit, mut then) = (Vec::new(), Vec::new());
                for &p in &ps {
                    if let Some(Ok(s)) = self.core.snapshot(p) {
                        commit.push(
                            json!({"partition": p, "offset": s.offset, "metadata": s.metadata}),
                        );
                        then.push(announcement(&self.core.progress_record(&s)));
                    }
                }
                if !commit.is_empty() {
                    out.effects.push(json!({ "commit": commit }));
                    out.effects.extend(then);
                }
                for p in ps {
                    self.core.revoke(p, t);
                }
            }
            "record" => {
                self.poll_prelude(t, &mut out);
                self.fetch(t, input, &mut out);
            }
            "next" => self.poll_prelude(t, &mut out),
            "commit" => {
                self.core.processed();
                self.commit_progress(t, &mut out);
                let commit: Vec<Value> = self
                    .core
                    .owned()
                    .into_iter()
                    .filter_map(|p| match self.core.snapshot(p) {
                        Some(Ok(s)) => Some(
                            json!({"partition": p, "offset": s.offset, "metadata": s.metadata}),
                        ),
                        _ => None,
                    })
                    .collect();
                if !commit.is_empty() {
                    out.effects.push(json!({ "commit": commit }));
                }
            }
            "tick" => {
                self.core.tick(t, u(&input["now_ms"]));
                let (pause, resume) = self.core.flow(t);
                out.effects
                    .extend(pause.into_iter().map(|p| json!({ "pause": p })));
                out.effects
                    .extend(resume.into_iter().map(|p| json!({ "resume": p })));
            }
            other => panic!("unknown input {other}"),
        }
        out
    }

    /// Step 5 of "How to replay": the record the application holds is processed, progress due is
    /// committed, released records are handed out (each processed by the next poll).
    fn poll_prelude(&mut self, t: Duration, out: &mut Actual) {
        loop {
            self.core.processed();
            self.commit_progress(t, out);
            let Some((p, o, split)) = self.core.next_ready() else {
                return;
            };
            out.delivered.push(record_out(p, o, split));
        }
    }

    fn fetch(&mut self, t: Duration, r: &Value, out: &mut Actual) {
        let p = part(&r["partition"]);
        let o = r["offset"].as_i64().unwrap();
        let key = (!r["key_b64"].is_null()).then(|| b64(&r["key_b64"]));
        let hs: Vec<(String, Option<Vec<u8>>)> = r["headers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| {
                let value = (!h[1].is_null()).then(|| b64(&h[1]));
                (h[0].as_str().unwrap().to_owned(), value)
            })
            .collect();
        let epoch = headers::epoch_of(hs.iter().map(|(n, v)| (n.as_str(), v.as_deref())));
        self.key_at.insert((p, o), key.clone());
        let split = self.core.label_record(p, o, key.as_deref(), epoch);
        let outcome = self.core.on_record(
            Incoming {
                partition: p,
                offset: o,
                key: key.as_deref(),
                epoch,
                msg: || (p, o, split),
            },
            || t,
        );
        match outcome {
            Outcome::Deliver => out.delivered.push(record_out(p, o, split)),
            Outcome::Skipped => out.skipped.push(json!([p, o])),
            Outcome::Held | Outcome::Unowned => {}
        }
    }

    /// C7 as the glue does it: hooks, one synchronous commit, announcements.
    fn commit_progress(&mut self, t: Duration, out: &mut Actual) {
        while self.core.has_progress_due() {
            let (mut hooks, mut snapshots, mut first) = (Vec::new(), Vec::new(), Vec::new());
            for p in self.core.progress_due() {
                hooks.extend(self.core.take_drained_epochs(p));
                match self.core.snapshot(p) {
                    Some(Ok(s)) => snapshots.push(s),
                    Some(Err(size)) => panic!("metadata of {size} bytes does not fit"),
                    None => first.extend(self.core.mark_durable(p, t)),
                }
            }
            out.effects.extend(first.iter().map(announcement));
            let owned = self.core.owned();
            for d in &hooks {
                let prev = d.prev.as_deref();
                let moved_out: Vec<String> = self
                    .keys
                    .iter()
                    .filter(|k| {
                        self.place(prev, k) == d.partition
                            && !owned.contains(&self.place(Some(&d.next), k))
                    })
                    .map(|k| B64.encode(k))
                    .collect();
                out.effects.push(json!({"hook": {"epoch": {
                    "partition": d.partition,
                    "epoch": d.next.epoch(),
                    "prev": prev.map(Assignment::epoch),
                    "moved_out_b64": moved_out,
                }}}));
            }
            if snapshots.is_empty() {
                return;
            }
            let commit: Vec<Value> = snapshots
                .iter()
                .map(|s| json!({"partition": s.partition, "offset": s.offset, "metadata": s.metadata}))
                .collect();
            out.effects.push(json!({ "commit": commit }));
            for s in &snapshots {
                self.core.committed(s.partition, s.drained, t);
                out.effects
                    .push(announcement(&self.core.progress_record(s)));
            }
        }
    }

    /// A key's partition under `a` (its first part if split; Kafka's placement without `a` or
    /// when `a` is of another partition count).
    fn place(&self, a: Option<&Assignment>, key: &[u8]) -> u32 {
        match a {
            Some(a) if a.partitions() == self.partitions => a
                .split_of(key)
                .map_or_else(|| a.partition_for(key), |parts| parts[0].partition),
            _ => kafka_partition(key, self.partitions),
        }
    }

    fn split_hooks(&mut self, out: &mut Actual) {
        for c in self.core.take_split_changes() {
            out.effects.push(json!({"hook": {"split": {
                "key_b64": B64.encode(&c.key),
                "epoch": c.epoch,
                "parts": c.parts.to_vec(),
                "partition": c.partition,
            }}}));
        }
    }

    fn compare(&mut self, actual: &Actual, expected: &Value) -> Result<(), String> {
        let list = |f: &str| expected[f].as_array().cloned().unwrap_or_default();
        // Per key in order (records of different keys released together come in any order).
        let by_key = |records: &[Value]| {
            let mut m: BTreeMap<Option<Vec<u8>>, Vec<Value>> = BTreeMap::new();
            for r in records {
                let at = (part(&r[0]), r[1].as_i64().unwrap());
                m.entry(self.key_at.get(&at).cloned().flatten())
                    .or_default()
                    .push(r.clone());
            }
            m
        };
        if by_key(&actual.delivered) != by_key(&list("delivered")) {
            return Err(format!(
                "delivered {:?}, expected {:?}",
                actual.delivered,
                list("delivered")
            ));
        }
        if actual.skipped != list("skipped") {
            return Err(format!(
                "skipped {:?}, expected {:?}",
                actual.skipped,
                list("skipped")
            ));
        }
        let held: BTreeMap<String, u64> = self
            .core
            .held_counts()
            .filter(|&(_, n)| n > 0)
            .map(|(p, n)| (p.to_string(), n as u64))
            .collect();
        let want: BTreeMap<String, u64> = expected["held"]
            .as_object()
            .map(|m| m.iter().map(|(p, n)| (p.clone(), u(n))).collect())
            .unwrap_or_default();
        if held != want {
            return Err(format!("held {held:?}, expected {want:?}"));
        }
        if actual.effects != list("effects") {
            return Err(format!(
                "effects\n  {}\nexpected\n  {}",
                Value::from(actual.effects.clone()),
                Value::from(list("effects"))
            ));
        }
        let a = self.core.take_anomalies();
        let want = &expected["anomalies"];
        let count = |v: &Value| v.as_u64().unwrap_or(0);
        if a.unknown_epoch_records != count(&want["unknown_epoch"])
            || a.clamped_leases != count(&want["clamped_leases"])
            || a.windows_left_out != count(&want["windows_left_out"])
            || MarkerReject::ALL.iter().any(|r| {
                a.rejected_markers[r.index()] != count(&want["markers_rejected"][r.as_str()])
            })
        {
            return Err(format!("anomalies {a:?}, expected {want}"));
        }
        Ok(())
    }
}

fn record_out(p: u32, o: i64, split: Option<u32>) -> Value {
    match split {
        Some(n) => json!([p, o, n]),
        None => json!([p, o]),
    }
}

fn announcement(p: &Progress) -> Value {
    let key = HandoffKey::Progress {
        group: p.group.clone(),
        topic: p.topic.clone(),
        partition: p.partition,
    };
    json!({"announce": {
        "key": key.encode(),
        "value": String::from_utf8(handoff::to_json(p)).unwrap(),
    }})
}
