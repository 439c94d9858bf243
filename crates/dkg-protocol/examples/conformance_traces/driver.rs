//! The recording side of the conformance traces (`spec/traces/README.md`): the trace format as
//! Rust types, a member that drives [`Core`] the way the Rust glue (`partitioner/src/kafka/consumer/`)
//! does, and the builder the scenarios are written with. Every input is built in wire form first
//! and decoded from it, so what is recorded is what a replayer that decodes the file must see.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde::Serialize;

use dkg_kafka_core::assignment::Assignment;
use dkg_kafka_protocol::book::{AssignmentBook, ControlUpdate};
use dkg_kafka_protocol::consumer::Monotonic;
use dkg_kafka_protocol::consumer::core::{Core, CoreConfig, Drained, Incoming, Outcome};
use dkg_kafka_protocol::consumer::history::partition_under;
use dkg_kafka_protocol::consumer::progress::CommitMeta;
use dkg_kafka_protocol::handoff::{
    self, HandoffEntry, HandoffKey, Lease, Marker, MarkerReject, ProducerId, Progress,
};
use dkg_kafka_protocol::headers;

// ------------------------------------------------------------------------------ the format

/// `config` of a trace.
#[derive(Clone, Debug, Serialize)]
pub struct Config {
    pub topic: String,
    pub group: String,
    pub partitions: u32,
    pub max_held: usize,
    pub stall_timeout_ms: u64,
    pub unknown_epoch_wait_ms: u64,
    pub max_lease_ms: u64,
    pub max_metadata_bytes: usize,
    pub history: usize,
    pub now_ms: u64,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            topic: TOPIC.to_owned(),
            group: GROUP.to_owned(),
            partitions: 4,
            max_held: 1000,
            stall_timeout_ms: 5000,
            unknown_epoch_wait_ms: 10_000,
            max_lease_ms: 120_000,
            max_metadata_bytes: 4096,
            history: 8,
            now_ms: NOW_MS,
        }
    }
}

/// The data topic of every trace.
pub const TOPIC: &str = "orders";
/// The member's group.
pub const GROUP: &str = "g";
/// The wall clock at the start of every trace.
pub const NOW_MS: u64 = 1_700_000_000_000;

/// A partition taken with its committed state.
#[derive(Clone, Debug, Serialize)]
pub struct Assigned {
    pub partition: u32,
    pub offset: Option<i64>,
    pub metadata: String,
}

/// A data record as fetched.
#[derive(Clone, Debug, Serialize)]
pub struct Record {
    pub partition: u32,
    pub offset: i64,
    pub key_b64: Option<String>,
    pub headers: Vec<(String, Option<String>)>,
}

/// One input (`in`).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Input {
    Control { key: String, value: Option<String> },
    Handoff { key: String, value: Option<String> },
    Assign(Vec<Assigned>),
    Revoke(Vec<u32>),
    Record(Record),
    Next {},
    Commit {},
    Tick { now_ms: u64 },
}

/// A hook called.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Hook {
    Assigned(Vec<u32>),
    Revoked(Vec<u32>),
    Epoch {
        partition: u32,
        epoch: u64,
        prev: Option<u64>,
        moved_out_b64: Vec<String>,
    },
    Split {
        key_b64: String,
        epoch: u64,
        parts: Vec<u32>,
        partition: Option<u32>,
    },
}

/// One offset of a synchronous commit.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Commit {
    pub partition: u32,
    pub offset: i64,
    pub metadata: String,
}

/// An effect, in order.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    Hook(Hook),
    Commit(Vec<Commit>),
    Announce { key: String, value: String },
    Pause(u32),
    Resume(u32),
}

/// What was counted during a step.
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct Counted {
    #[serde(skip_serializing_if = "is_zero")]
    pub unknown_epoch: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub clamped_leases: u64,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub markers_rejected: BTreeMap<String, u64>,
    #[serde(skip_serializing_if = "is_zero")]
    pub windows_left_out: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The outputs of one step (`out`).
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct Out {
    /// `[partition, offset]` or `[partition, offset, parts]`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub delivered: Vec<Vec<i64>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<[i64; 2]>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub held: BTreeMap<String, usize>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub effects: Vec<Effect>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub anomalies: Option<Counted>,
}

/// One step.
#[derive(Clone, Debug, Serialize)]
pub struct Step {
    pub t_ms: u64,
    #[serde(rename = "in")]
    pub input: Input,
    pub out: Out,
}

// ------------------------------------------------------------------------------ the member

/// What the member keeps of a record it may hand out later.
#[derive(Clone, Copy, Debug)]
struct Rec {
    partition: u32,
    offset: i64,
    split: Option<u32>,
}

fn delivered(r: Rec) -> Vec<i64> {
    let mut v = vec![i64::from(r.partition), r.offset];
    if let Some(n) = r.split {
        v.push(i64::from(n));
    }
    v
}

fn b64(bytes: &[u8]) -> String {
    B64.encode(bytes)
}

/// A consumer group member: the core plus what the Rust glue does around it, with the Kafka client
/// replaced by the trace.
#[derive(Debug)]
pub struct Member {
    cfg: Config,
    keys: Vec<Vec<u8>>,
    core: Core<Rec>,
    book: AssignmentBook,
}

impl Member {
    pub fn new(cfg: &Config, keys: &[Vec<u8>]) -> Self {
        let mut core = Core::new(
            &cfg.topic,
            &cfg.group,
            cfg.partitions,
            CoreConfig {
                max_held: cfg.max_held,
                stall_timeout: Duration::from_millis(cfg.stall_timeout_ms),
                max_metadata_bytes: cfg.max_metadata_bytes,
                history: cfg.history,
                unknown_epoch_wait: Duration::from_millis(cfg.unknown_epoch_wait_ms),
                max_lease: Duration::from_millis(cfg.max_lease_ms),
            },
        );
        core.tick(Monotonic::ZERO, cfg.now_ms);
        Self {
            cfg: cfg.clone(),
            keys: keys.to_vec(),
            core,
            book: AssignmentBook::new(),
        }
    }

    /// Run one step at monotonic time `t_ms`.
    pub fn step(&mut self, t_ms: u64, input: &Input) -> Out {
        let t = Duration::from_millis(t_ms);
        let mut out = Out::default();
        match input {
            Input::Control { key, value } => {
                let update = self
                    .book
                    .apply(Some(key.as_bytes()), value.as_deref().map(str::as_bytes));
                if let ControlUpdate::Adopted(a) = update {
                    self.core.on_assignment(a, t);
                }
                self.split_hooks(&mut out);
            }
            Input::Handoff { key, value } => {
                if let Ok(entry) =
                    handoff::decode(Some(key.as_bytes()), value.as_deref().map(str::as_bytes))
                {
                    self.apply_handoff(entry, t);
                }
                self.split_hooks(&mut out);
            }
            Input::Assign(parts) => {
                for a in parts {
                    let meta = match CommitMeta::parse(&a.metadata) {
                        Some(Ok(m)) => Some(m),
                        _ => None,
                    };
                    self.core.assign(a.partition, a.offset, meta.as_ref(), t);
                }
                let ps: Vec<u32> = parts.iter().map(|a| a.partition).collect();
                out.effects.push(Effect::Hook(Hook::Assigned(ps.clone())));
                for p in ps {
                    if let Some(r) = self.core.initial_progress(p) {
                        announce(&mut out, &r);
                    }
                }
            }
            Input::Revoke(ps) => {
                out.effects.push(Effect::Hook(Hook::Revoked(ps.clone())));
                let mut commit = Vec::new();
                let mut announced = Vec::new();
                for &p in ps {
                    if let Some(Ok(s)) = self.core.snapshot(p) {
                        commit.push(Commit {
                            partition: p,
                            offset: s.offset,
                            metadata: s.metadata.clone(),
                        });
                        announced.push(self.core.progress_record(&s));
                    }
                }
                if !commit.is_empty() {
                    out.effects.push(Effect::Commit(commit));
                    for r in &announced {
                        announce(&mut out, r);
                    }
                }
                for &p in ps {
                    self.core.revoke(p, t);
                }
            }
            Input::Record(r) => {
                self.prelude(t, &mut out);
                self.fetch(r, t, &mut out);
            }
            Input::Next {} => self.prelude(t, &mut out),
            Input::Commit {} => {
                self.core.processed();
                self.commit_progress(t, &mut out);
                let commit: Vec<Commit> = self
                    .core
                    .owned()
                    .into_iter()
                    .filter_map(|p| match self.core.snapshot(p) {
                        Some(Ok(s)) => Some(Commit {
                            partition: p,
                            offset: s.offset,
                            metadata: s.metadata,
                        }),
                        _ => None,
                    })
                    .collect();
                if !commit.is_empty() {
                    out.effects.push(Effect::Commit(commit));
                }
            }
            Input::Tick { now_ms } => {
                self.core.tick(t, *now_ms);
                let (pause, resume) = self.core.flow(t);
                self.core.take_stalled();
                out.effects.extend(pause.into_iter().map(Effect::Pause));
                out.effects.extend(resume.into_iter().map(Effect::Resume));
            }
        }
        out.held = self
            .core
            .held_counts()
            .filter(|&(_, n)| n > 0)
            .map(|(p, n)| (p.to_string(), n))
            .collect();
        let a = self.core.take_anomalies();
        let counted = Counted {
            unknown_epoch: a.unknown_epoch_records,
            clamped_leases: a.clamped_leases,
            markers_rejected: MarkerReject::ALL
                .iter()
                .filter(|r| a.rejected_markers[r.index()] > 0)
                .map(|r| (r.as_str().to_owned(), a.rejected_markers[r.index()]))
                .collect(),
            windows_left_out: a.windows_left_out,
        };
        if counted != Counted::default() {
            out.anomalies = Some(counted);
        }
        out
    }

    /// `partitioner/src/kafka/consumer/followers.rs`'s `apply`.
    fn apply_handoff(&mut self, entry: HandoffEntry, t: Monotonic) {
        if entry.topic() != self.cfg.topic {
            return;
        }
        match entry {
            HandoffEntry::Lease(l) => self.core.on_lease(l, t),
            HandoffEntry::History(a) => self.core.on_assignment(a, t),
            HandoffEntry::Progress(p) => self.core.on_progress(&p, t),
            HandoffEntry::Marker(m) => self.core.on_marker(m, t),
            HandoffEntry::MarkerRejected { reason, .. } => self.core.on_marker_rejected(reason),
            HandoffEntry::Removed(HandoffKey::Lease { producer, .. }) => {
                self.core.on_lease_removed(&producer, t);
            }
            HandoffEntry::Removed(_) => {}
        }
    }

    fn split_hooks(&mut self, out: &mut Out) {
        for c in self.core.take_split_changes() {
            out.effects.push(Effect::Hook(Hook::Split {
                key_b64: b64(&c.key),
                epoch: c.epoch,
                parts: c.parts.to_vec(),
                partition: c.partition,
            }));
        }
    }

    /// What the glue's `recv` does before it fetches: the application's record is processed,
    /// progress due is committed, released records are handed out (each processed by the
    /// application's next poll).
    fn prelude(&mut self, t: Monotonic, out: &mut Out) {
        loop {
            self.core.processed();
            self.commit_progress(t, out);
            match self.core.next_ready() {
                Some(r) => out.delivered.push(delivered(r)),
                None => return,
            }
        }
    }

    fn fetch(&mut self, r: &Record, t: Monotonic, out: &mut Out) {
        let key = r
            .key_b64
            .as_ref()
            .map(|k| B64.decode(k).unwrap_or_default());
        let hs: Vec<(String, Option<Vec<u8>>)> = r
            .headers
            .iter()
            .map(|(n, v)| {
                (
                    n.clone(),
                    v.as_ref().map(|v| B64.decode(v).unwrap_or_default()),
                )
            })
            .collect();
        let epoch = headers::epoch_of(hs.iter().map(|(n, v)| (n.as_str(), v.as_deref())));
        let split = self
            .core
            .label_record(r.partition, r.offset, key.as_deref(), epoch);
        let rec = Rec {
            partition: r.partition,
            offset: r.offset,
            split,
        };
        let outcome = self.core.on_record(
            Incoming {
                partition: r.partition,
                offset: r.offset,
                key: key.as_deref(),
                epoch,
                msg: || rec,
            },
            || t,
        );
        match outcome {
            Outcome::Deliver => out.delivered.push(delivered(rec)),
            Outcome::Skipped => out.skipped.push([i64::from(r.partition), r.offset]),
            Outcome::Held | Outcome::Unowned => {}
        }
    }

    /// `partitioner/src/kafka/consumer/commits.rs`'s `commit_progress`, until nothing is due.
    fn commit_progress(&mut self, t: Monotonic, out: &mut Out) {
        for _ in 0..4 {
            if !self.core.has_progress_due() {
                return;
            }
            let mut drained: Vec<Drained> = Vec::new();
            let mut snapshots = Vec::new();
            let mut immediate = Vec::new();
            for p in self.core.progress_due() {
                drained.extend(self.core.take_drained_epochs(p));
                match self.core.snapshot(p) {
                    Some(Ok(s)) => snapshots.push(s),
                    Some(Err(_)) => {}
                    None => {
                        if let Some(r) = self.core.mark_durable(p, t) {
                            immediate.push(r);
                        }
                    }
                }
            }
            for r in &immediate {
                announce(out, r);
            }
            let owned = self.core.owned();
            for d in &drained {
                out.effects.push(Effect::Hook(self.epoch_hook(d, &owned)));
            }
            if snapshots.is_empty() {
                return;
            }
            out.effects.push(Effect::Commit(
                snapshots
                    .iter()
                    .map(|s| Commit {
                        partition: s.partition,
                        offset: s.offset,
                        metadata: s.metadata.clone(),
                    })
                    .collect(),
            ));
            for s in &snapshots {
                self.core.committed(s.partition, s.drained, t);
                let r = self.core.progress_record(s);
                announce(out, &r);
            }
        }
    }

    /// The epoch hook with the trace's keys that moved out (the glue's `EpochChange::moved_out`).
    fn epoch_hook(&self, d: &Drained, owned: &[u32]) -> Hook {
        let n = self.cfg.partitions;
        let place = |a: Option<&Assignment>, key: &[u8]| partition_under(a, key, n);
        let prev = d.prev.as_deref();
        let moved_out_b64 = self
            .keys
            .iter()
            .filter(|k| place(prev, k) == d.partition && !owned.contains(&place(Some(&d.next), k)))
            .map(|k| b64(k))
            .collect();
        Hook::Epoch {
            partition: d.partition,
            epoch: d.next.epoch(),
            prev: prev.map(Assignment::epoch),
            moved_out_b64,
        }
    }
}

fn announce(out: &mut Out, p: &Progress) {
    let key = HandoffKey::Progress {
        group: p.group.clone(),
        topic: p.topic.clone(),
        partition: p.partition,
    };
    out.effects.push(Effect::Announce {
        key: key.encode(),
        value: String::from_utf8_lossy(&handoff::to_json(p)).into_owned(),
    });
}

// ------------------------------------------------------------------------------ the builder

/// A trace being written: every input runs at once on a live member, its outputs recorded.
#[derive(Debug)]
pub struct Trace {
    pub name: String,
    pub description: String,
    pub cfg: Config,
    pub keys: Vec<Vec<u8>>,
    member: Member,
    /// The same member once more: the hold buffer releases records of different keys in hash
    /// order, randomly seeded per buffer, so a step whose outputs depend on that order differs
    /// between the two and is refused (the trace would not be reproducible).
    twin: Member,
    pub steps: Vec<Step>,
    t_ms: u64,
}

impl Trace {
    pub fn new(name: &str, description: &str, keys: &[&[u8]], cfg: Config) -> Self {
        let keys: Vec<Vec<u8>> = keys.iter().map(|k| k.to_vec()).collect();
        let member = Member::new(&cfg, &keys);
        let twin = Member::new(&cfg, &keys);
        Self {
            name: name.to_owned(),
            description: description.to_owned(),
            cfg,
            keys,
            member,
            twin,
            steps: Vec::new(),
            t_ms: 0,
        }
    }

    /// The monotonic time of the following steps.
    pub fn at(&mut self, t_ms: u64) -> &mut Self {
        assert!(t_ms >= self.t_ms, "{}: time runs backwards", self.name);
        self.t_ms = t_ms;
        self
    }

    /// Run `input` now and record it.
    pub fn push(&mut self, input: Input) -> &Out {
        let out = self.member.step(self.t_ms, &input);
        let twin = self.twin.step(self.t_ms, &input);
        assert!(
            out == twin,
            "{} step {}: the outputs depend on the order of keys released together; make that \
             release single-key",
            self.name,
            self.steps.len()
        );
        self.steps.push(Step {
            t_ms: self.t_ms,
            input,
            out,
        });
        &self.steps[self.steps.len() - 1].out
    }

    /// The outputs of the last step.
    pub fn last(&self) -> &Out {
        &self.steps[self.steps.len() - 1].out
    }

    pub fn tick(&mut self, now_ms: u64) -> &Out {
        self.push(Input::Tick { now_ms })
    }

    pub fn control(&mut self, a: &Assignment) -> &Out {
        self.push(Input::Control {
            key: a.topic().to_owned(),
            value: Some(String::from_utf8_lossy(&a.to_json()).into_owned()),
        })
    }

    pub fn handoff(&mut self, key: &str, value: Option<&str>) -> &Out {
        self.push(Input::Handoff {
            key: key.to_owned(),
            value: value.map(str::to_owned),
        })
    }

    pub fn handoff_value<T: Serialize>(&mut self, key: &HandoffKey, value: &T) -> &Out {
        let v = String::from_utf8_lossy(&handoff::to_json(value)).into_owned();
        self.handoff(&key.encode(), Some(&v))
    }

    pub fn assign(&mut self, parts: &[(u32, Option<i64>, &str)]) -> &Out {
        self.push(Input::Assign(
            parts
                .iter()
                .map(|&(partition, offset, metadata)| Assigned {
                    partition,
                    offset,
                    metadata: metadata.to_owned(),
                })
                .collect(),
        ))
    }

    pub fn revoke(&mut self, parts: &[u32]) -> &Out {
        self.push(Input::Revoke(parts.to_vec()))
    }

    /// A record with raw headers.
    pub fn record_h(
        &mut self,
        partition: u32,
        offset: i64,
        key: Option<&[u8]>,
        headers: &[(&str, Option<&[u8]>)],
    ) -> &Out {
        self.push(Input::Record(Record {
            partition,
            offset,
            key_b64: key.map(b64),
            headers: headers
                .iter()
                .map(|&(n, v)| (n.to_owned(), v.map(b64)))
                .collect(),
        }))
    }

    /// A record of `key`, stamped with `epoch` (`None`: unstamped) as an ordering producer writes
    /// it (`dkg-epoch`, then `dkg-producer`).
    pub fn record(&mut self, partition: u32, offset: i64, key: &[u8], epoch: Option<u64>) -> &Out {
        match epoch {
            Some(e) => {
                let e = e.to_string();
                self.record_h(
                    partition,
                    offset,
                    Some(key),
                    &[
                        (headers::EPOCH_HEADER, Some(e.as_bytes())),
                        (headers::PRODUCER_HEADER, Some(Y.as_bytes())),
                    ],
                )
            }
            None => self.record_h(partition, offset, Some(key), &[]),
        }
    }

    /// Producer `producer`'s lease on the trace topic (`closed`: its `closed_at_epoch`).
    pub fn lease(
        &mut self,
        producer: &str,
        first_epoch: u64,
        expires_at_ms: u64,
        closed: Option<u64>,
    ) -> &Out {
        let lease = Lease {
            producer: pid(producer),
            topic: self.cfg.topic.clone(),
            first_epoch,
            lease_ms: 30_000,
            expires_at_ms,
            closed_at_epoch: closed,
        };
        self.handoff_value(&HandoffKey::of_lease(&lease), &lease)
    }

    /// Producer `producer`'s marker of `epoch`.
    pub fn marker(&mut self, producer: &str, epoch: u64, ends: &[i64]) -> &Out {
        let m = Marker {
            producer: pid(producer),
            topic: self.cfg.topic.clone(),
            epoch,
            ends: ends.to_vec(),
        };
        let key = HandoffKey::Marker {
            topic: m.topic.clone(),
            producer: m.producer.clone(),
        };
        self.handoff_value(&key, &m)
    }

    /// Another member's progress announcement for `partition`.
    pub fn progress(&mut self, partition: u32, drained: u64) -> &Out {
        let p = Progress {
            group: self.cfg.group.clone(),
            topic: self.cfg.topic.clone(),
            partition,
            drained,
            passed: BTreeMap::new(),
            committed_offset: 0,
            updated_at_ms: self.cfg.now_ms,
        };
        let key = HandoffKey::Progress {
            group: p.group.clone(),
            topic: p.topic.clone(),
            partition,
        };
        self.handoff_value(&key, &p)
    }

    pub fn next(&mut self) -> &Out {
        self.push(Input::Next {})
    }

    pub fn commit(&mut self) -> &Out {
        self.push(Input::Commit {})
    }

    /// The trace file: one JSON object, each step on one line.
    pub fn to_json(&self) -> String {
        let rule = &self.name[..3];
        let mut s = String::from("{\n");
        let field = |s: &mut String, name: &str, v: String| {
            let _ = writeln!(s, "  \"{name}\": {v},");
        };
        field(&mut s, "rule", json(rule));
        field(&mut s, "name", json(&self.name));
        field(&mut s, "description", json(&self.description));
        field(&mut s, "config", json(&self.cfg));
        let keys: Vec<String> = self.keys.iter().map(|k| b64(k)).collect();
        field(&mut s, "keys_b64", json(&keys));
        s.push_str("  \"steps\": [\n");
        for (i, step) in self.steps.iter().enumerate() {
            let sep = if i + 1 < self.steps.len() { "," } else { "" };
            let _ = writeln!(s, "    {}{sep}", json(step));
        }
        s.push_str("  ]\n}\n");
        s
    }
}

/// JSON of a plain value (strings, integers, lists, maps: serialization cannot fail).
fn json<T: Serialize + ?Sized>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

// ------------------------------------------------------------------------------ fixtures

/// The producers of the traces.
pub const Y: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
pub const Z: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

/// An assignment of the trace topic: every key not listed on partition 0 (one bucket), each
/// listed key whole on its partition, or split over the listed parts (weight 1 each).
pub fn doc(
    partitions: u32,
    epoch: u64,
    whole: &[(&[u8], u32)],
    split: &[(&[u8], &[u32])],
) -> Assignment {
    use dkg_kafka_core::assignment::{AssignmentParts, HeavyKey, SplitPart};
    let mut heavy: Vec<HeavyKey> = whole
        .iter()
        .map(|&(k, p)| HeavyKey::whole(k.to_vec(), p, 10))
        .collect();
    heavy.extend(split.iter().map(|&(k, parts)| {
        HeavyKey {
            key: k.to_vec(),
            partition: parts[0],
            weight: 10,
            split: parts
                .iter()
                .map(|&partition| SplitPart {
                    partition,
                    weight: 1,
                })
                .collect(),
        }
    }));
    Assignment::new(AssignmentParts {
        topic: TOPIC.to_owned(),
        partitions,
        epoch,
        bucket_hash: dkg_kafka_core::hash::BucketHash::default(),
        table: vec![0],
        heavy,
        params: dkg_kafka_core::fixtures::params(),
        created_at_ms: 1,
        predicted_load: vec![1.0 / f64::from(partitions); partitions as usize],
    })
    .unwrap_or_else(|e| panic!("a fixture assignment: {e}"))
}

/// A producer id of the fixtures.
pub fn pid(s: &str) -> ProducerId {
    ProducerId::parse(s).unwrap_or_else(|| panic!("not a producer id: {s}"))
}
