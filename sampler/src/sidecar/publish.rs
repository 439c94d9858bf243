//! Publishing assignments: the transactional producer that makes one publisher per topic, and the control
//! topic view that tells the sampler the current assignment and epoch.
//!
//! # Fencing
//! Every sampler of topic `T` publishes through a transactional producer with `transactional.id =
//! dkg-sampler.T` (overridable). `init_transactions` bumps the id's producer epoch on the broker, which
//! fences any earlier producer with the same id: its next produce or commit fails with a fatal
//! `PRODUCER_FENCED` / `_FENCED` error, and an open transaction of it is aborted, so a reader with
//! `isolation.level=read_committed` (the control topic reader) never sees its documents.
//!
//! Epochs: after `init_transactions`, and only then, the publisher reads the control topic to its end;
//! any transaction of a previous holder of the id is resolved by then, so the last epoch read is final and
//! the next document gets a strictly higher one. The same happens at every start, so epochs increase across
//! restarts (and across leader changes of a sampler group).
//!
//! What a fenced instance does (the documented choice): it stops publishing at once, logs an error naming
//! the transactional id, reports `"publisher": "fenced"` on `/healthz`, and keeps consuming, shipping
//! its sketch and serving metrics. It re-initialises (and thereby takes publishing back) only when its
//! consumer group hands it partition 0 again in a NEW group generation, which is exactly when a sampler
//! group legitimately makes it the leader again. It never retries in a loop, so two misconfigured
//! samplers (different groups, same transactional id) cannot fence each other back and forth: the later
//! one wins and the earlier one stays quiet until its own group rebalances.
//!
//! # Format version 2 (`--control-format v2`, `docs/spec.md` 6.4)
//! The view also keeps the generation in force and a retraction document's floor (part of the max epoch,
//! so the next epoch is above it after compaction and restarts); the publisher writes documents with
//! [`Assignment::to_json_compact`] naming the generation, and the generation record itself
//! ([`Publisher::write_generation`], when none is in force: see `interval.rs`). With v1 it writes exactly
//! what it wrote before.
//!
//! # Test hook
//! `DKG_TEST_PAUSE_BEFORE_COMMIT_MS=N` (for the fault tests only, never set in production): every
//! publish waits N ms between producing the document and committing the transaction, after logging
//! `test hook: pausing inside the publish transaction`, so a test can SIGKILL the sidecar with the
//! transaction open (`sampler/tests/fault_sampler_kill.rs`). Unset, a publish reads one environment
//! variable and nothing else changes.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use dkg_kafka::kafka::control;
use dkg_kafka::kafka::control::{AssignmentBook, ControlRecord, ControlTopicReader, ControlUpdate};
use dkg_kafka_core::assignment::Assignment;
use rdkafka::config::ClientConfig;
use rdkafka::producer::{FutureProducer, Producer};
use rdkafka::types::RDKafkaErrorCode;

use super::misplaced::{PlacementFeed, Placements};
use super::{RunError, now_ms};
use crate::cli::ControlFormat;

/// Timeout of transactional calls and deliveries.
const TXN_TIMEOUT: Duration = Duration::from_secs(30);

/// What the control topic says about one data topic.
#[derive(Debug, Clone, Default)]
pub struct ControlState {
    /// The current assignment (None: never published, or retracted).
    pub current: Option<Arc<Assignment>>,
    /// The highest epoch ever read for the topic (survives a retraction), a retraction document's
    /// floor included (`docs/spec.md` 6.4), so the next epoch is above it also after compaction.
    pub max_epoch: u64,
    /// The control-topic offset of the assignment that set `max_epoch` (None: none, or a retraction
    /// document's floor, whose offset the book does not report).
    pub max_epoch_offset: Option<i64>,
    /// Control-topic records read.
    pub records: u64,
    /// The control topic's generation in force (the last `@generation` record read), if any.
    pub generation: Option<String>,
    /// The offset after the last record read: a control topic whose end is now below it was
    /// recreated (or truncated) under the reader.
    pub end_offset: i64,
    /// The live reader met a record below `end_offset`: the control topic was recreated (librdkafka
    /// resets an out-of-range position to the beginning of the new log) or the reader re-read it.
    /// Cleared by a fresh read to the end, which is what it asks for.
    pub rewound: bool,
    /// The placements the topic had, with when this view saw each change (the misplacement
    /// detector's history; empty until the first read to the end).
    pub placements: Arc<Placements>,
}

impl ControlState {
    /// `next` is in effect from now: extend the placement history (the first time: start it).
    fn place(&mut self, next: Option<Arc<Assignment>>) {
        if self.placements.latest().is_none() {
            self.placements = Arc::new(Placements::starting(next));
        } else if let Some(p) = self.placements.then(next, now_ms()) {
            self.placements = Arc::new(p);
        }
    }
}

/// Follows the control topic for one data topic in a background task.
#[derive(Clone)]
pub struct ControlView {
    state: Arc<Mutex<ControlState>>,
    connection: ClientConfig,
    control_topic: String,
    topic: String,
    feed: Arc<PlacementFeed>,
}

impl std::fmt::Debug for ControlView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlView")
            .field("state", &self.state)
            .field("connection", &crate::cli::RedactedConfig(&self.connection))
            .field("control_topic", &self.control_topic)
            .field("topic", &self.topic)
            .finish()
    }
}

impl ControlView {
    /// Read the control topic to its end, then follow it live until `stop` fires.
    pub async fn start(
        connection: &ClientConfig,
        control_topic: &str,
        topic: &str,
        stop: tokio::sync::watch::Receiver<bool>,
    ) -> Result<Self, RunError> {
        let view = Self {
            state: Arc::new(Mutex::new(ControlState::default())),
            connection: connection.clone(),
            control_topic: control_topic.to_owned(),
            topic: topic.to_owned(),
            feed: Arc::new(PlacementFeed::default()),
        };
        let mut reader = view.read_to_end().await?;
        let live = view.clone();
        let topic = topic.to_owned();
        let mut stop = stop;
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = stop.changed() => return,
                    rec = reader.next_record() => {
                        apply_update(&live.state, &topic, &rec);
                        fold_book(&live.state, &topic, reader.book());
                        live.feed_placements();
                    }
                }
            }
        });
        Ok(view)
    }

    /// A new reader, read from the beginning to the end; its records are applied to the view.
    async fn read_to_end(&self) -> Result<ControlTopicReader, RunError> {
        let mut reader = ControlTopicReader::new(&self.connection, &self.control_topic)
            .map_err(|e| RunError::Setup(format!("control topic reader: {e}")))?;
        let mut fresh = ControlState::default();
        let fresh_state = Mutex::new(ControlState::default());
        reader
            .catch_up(TXN_TIMEOUT, |r| apply_update(&fresh_state, &self.topic, r))
            .await
            .map_err(|e| {
                RunError::Setup(format!(
                    "reading the control topic {:?} to its end: {e}",
                    self.control_topic
                ))
            })?;
        fold_book(&fresh_state, &self.topic, reader.book());
        std::mem::swap(
            &mut fresh,
            &mut fresh_state
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        let mut s = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if fresh.max_epoch >= s.max_epoch {
            s.max_epoch = fresh.max_epoch;
            s.max_epoch_offset = fresh.max_epoch_offset.or(s.max_epoch_offset);
        }
        s.records = s.records.max(fresh.records);
        // What the log says now is authoritative (it may be a retraction, or a new generation).
        s.current = fresh.current;
        s.generation = fresh.generation;
        s.end_offset = fresh.end_offset;
        s.rewound = false;
        let current = s.current.clone();
        s.place(current);
        drop(s);
        self.feed_placements();
        Ok(reader)
    }

    /// Where the consume thread's misplacement detector gets the placement history.
    pub fn placement_feed(&self) -> Arc<PlacementFeed> {
        Arc::clone(&self.feed)
    }

    /// Hand the placement history to the detector if it changed.
    fn feed_placements(&self) {
        let placements = Arc::clone(
            &self
                .state
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .placements,
        );
        self.feed.offer(placements);
    }

    /// The state as of now.
    pub fn state(&self) -> ControlState {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Read everything committed before this call (a fresh read-committed reader from the beginning: the
    /// live reader may sit at the end, where librdkafka reports no new end-of-partition event).
    pub async fn catch_up(&self) -> Result<ControlState, RunError> {
        drop(self.read_to_end().await?);
        Ok(self.state())
    }

    /// Record a document this instance just published (the reader will confirm it shortly).
    pub fn note_published(&self, assignment: Arc<Assignment>) {
        let mut s = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        s.max_epoch = s.max_epoch.max(assignment.epoch());
        if s.current
            .as_ref()
            .is_none_or(|c| c.epoch() <= assignment.epoch())
        {
            // Before any producer can read it: records placed by it are never judged by the old one.
            s.place(Some(Arc::clone(&assignment)));
            s.current = Some(assignment);
        }
        drop(s);
        self.feed_placements();
    }
}

fn apply_update(state: &Mutex<ControlState>, topic: &str, record: &ControlRecord) {
    let mut s = state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    s.records += 1;
    // Offsets only grow in one log: a smaller one is a new log under the same name (or a re-read).
    if record.offset < s.end_offset {
        s.rewound = true;
    }
    s.end_offset = record.offset + 1;
    match &record.update {
        // Only accepted documents count: the book rejects an epoch above 2^53 - 1 (out_of_range),
        // so a forged one never moves the next epoch.
        ControlUpdate::Adopted(a) if a.topic() == topic => {
            if a.epoch() >= s.max_epoch {
                s.max_epoch = a.epoch();
                s.max_epoch_offset = Some(record.offset);
            }
            s.current = Some(Arc::clone(a));
            s.place(Some(Arc::clone(a)));
        }
        ControlUpdate::Retracted { topic: t } if t == topic => {
            tracing::warn!(
                topic,
                "the topic's assignment was retracted on the control topic"
            );
            s.current = None;
            s.place(None);
        }
        // A new generation (the control topic was recreated): every assignment dropped.
        ControlUpdate::Reset { .. } => {
            s.current = None;
            s.place(None);
        }
        _ => {}
    }
}

/// Take from the reader's book what the events do not carry: a retraction document's floor and
/// the generation in force (`docs/spec.md` 6.4).
fn fold_book(state: &Mutex<ControlState>, topic: &str, book: &AssignmentBook) {
    let mut s = state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(floor) = book.retraction(topic)
        && floor.epoch > s.max_epoch
    {
        s.max_epoch = floor.epoch;
        s.max_epoch_offset = None;
    }
    // Never back to none here: a reader asked to re-read has none until it meets the record again,
    // and the publisher writes a generation only after a fresh read found none (interval.rs).
    if let Some(g) = book.generation() {
        s.generation = Some(g.to_owned());
    }
}

/// The publisher's state, as reported on `/healthz`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PublisherState {
    /// Not the leader: no producer.
    Standby,
    /// Holds the transactional id.
    Active,
    /// Fenced by another instance in this ownership generation.
    Fenced {
        /// The ownership generation it was fenced in.
        generation: u64,
    },
    /// `--dry-run`: never publishes.
    DryRun,
}

impl PublisherState {
    /// Name for `/healthz`.
    pub fn as_str(&self) -> &'static str {
        match self {
            PublisherState::Standby => "standby",
            PublisherState::Active => "active",
            PublisherState::Fenced { .. } => "fenced",
            PublisherState::DryRun => "dry-run",
        }
    }
}

/// Why a publish did not happen.
#[derive(Debug)]
pub enum PublishFailure {
    /// Another instance holds the transactional id; this one stopped publishing.
    Fenced,
    /// A transient error; the transaction was aborted and the next interval retries.
    Retry(String),
}

/// The transactional publisher of one data topic.
pub struct Publisher {
    config: ClientConfig,
    control_topic: String,
    transactional_id: String,
    producer: Option<FutureProducer>,
    state: PublisherState,
    format: ControlFormat,
}

/// What one publish transaction writes.
#[derive(Clone, Copy, Debug)]
enum Publication<'a> {
    /// An assignment document.
    Assignment(&'a Assignment),
    /// The control topic's generation record with this id (`--control-format v2`).
    Generation(&'a str),
}

impl Publication<'_> {
    /// For the logs: the epoch (0 for a generation record).
    fn epoch(&self) -> u64 {
        match self {
            Publication::Assignment(a) => a.epoch(),
            Publication::Generation(_) => 0,
        }
    }

    /// For the logs: what is published.
    fn what(&self) -> String {
        match self {
            Publication::Assignment(a) => format!("for topic {:?}", a.topic()),
            Publication::Generation(g) => format!("the control topic's generation record {g}"),
        }
    }
}

impl std::fmt::Debug for Publisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Publisher")
            .field("control_topic", &self.control_topic)
            .field("transactional_id", &self.transactional_id)
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

fn is_fencing(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::Fenced
            | RDKafkaErrorCode::ProducerFenced
            | RDKafkaErrorCode::InvalidProducerEpoch
    )
}

impl Publisher {
    /// A publisher (no producer until [`Publisher::activate`]) writing records of `format`.
    pub fn new(
        connection: &ClientConfig,
        control_topic: &str,
        transactional_id: &str,
        format: ControlFormat,
    ) -> Self {
        let mut config = control::publisher_config(connection);
        config
            .set("transactional.id", transactional_id)
            .set("transaction.timeout.ms", "60000")
            .set("linger.ms", "0");
        Self {
            config,
            control_topic: control_topic.to_owned(),
            transactional_id: transactional_id.to_owned(),
            producer: None,
            state: PublisherState::Standby,
            format,
        }
    }

    /// A publisher that never publishes (`--dry-run`).
    pub fn dry_run(connection: &ClientConfig, control_topic: &str) -> Self {
        let mut p = Self::new(connection, control_topic, "", ControlFormat::V1);
        p.state = PublisherState::DryRun;
        p
    }

    /// The state.
    pub fn state(&self) -> PublisherState {
        self.state
    }

    /// The transactional id.
    pub fn transactional_id(&self) -> &str {
        &self.transactional_id
    }

    /// Make sure this instance holds the transactional id (creating the producer and fencing any other
    /// holder). Returns `Ok(false)` when it must not publish: dry run, or fenced in this `generation`.
    pub async fn activate(&mut self, generation: u64) -> Result<bool, RunError> {
        match self.state {
            PublisherState::DryRun => return Ok(false),
            PublisherState::Active if self.producer.is_some() => return Ok(true),
            PublisherState::Fenced { generation: g } if g == generation => return Ok(false),
            _ => {}
        }
        let producer: FutureProducer = self.config.create().map_err(|e| RunError::Kafka {
            what: "creating the transactional producer".into(),
            source: e,
        })?;
        let p = producer.clone();
        let init = tokio::task::spawn_blocking(move || p.init_transactions(TXN_TIMEOUT))
            .await
            .map_err(|e| RunError::Setup(format!("init_transactions task: {e}")))?;
        if let Err(e) = init {
            return Err(RunError::Kafka {
                what: format!(
                    "init_transactions for transactional.id {:?}",
                    self.transactional_id
                ),
                source: e,
            });
        }
        tracing::info!(transactional_id = %self.transactional_id, "holding the transactional id: this instance publishes");
        self.producer = Some(producer);
        self.state = PublisherState::Active;
        Ok(true)
    }

    /// Give up the producer (no longer the leader). Another instance's `init_transactions` would fence it
    /// anyway; dropping it avoids a pointless fatal error later.
    pub fn deactivate(&mut self) {
        if self.producer.take().is_some() {
            tracing::info!(transactional_id = %self.transactional_id, "no longer the publisher (lost partition 0)");
        }
        if self.state == PublisherState::Active {
            self.state = PublisherState::Standby;
        }
    }

    async fn transaction(
        &self,
        producer: &FutureProducer,
        publication: Publication<'_>,
    ) -> Result<(), StepError> {
        let p = producer.clone();
        let begun = tokio::task::spawn_blocking(move || p.begin_transaction()).await;
        StepError::check("begin_transaction", begun)?;
        let topic = &self.control_topic;
        let sent = match (publication, self.format) {
            // Version 1: byte for byte what every earlier release wrote.
            (Publication::Assignment(a), ControlFormat::V1) => {
                control::publish_assignment(producer, topic, a, TXN_TIMEOUT).await
            }
            (Publication::Assignment(a), ControlFormat::V2) => {
                let json = a.to_json_compact();
                control::publish_value(producer, topic, a.topic(), &json, TXN_TIMEOUT).await
            }
            (Publication::Generation(g), _) => {
                control::publish_generation(producer, topic, g, TXN_TIMEOUT).await
            }
        };
        sent.map(|_| ()).map_err(|e| StepError {
            step: "producing the record",
            code: match &e {
                dkg_kafka::Error::Kafka(k) => k.rdkafka_error_code(),
                _ => None,
            },
            text: e.to_string(),
        })?;
        if let Some(pause) = test_pause_before_commit() {
            tracing::warn!(
                epoch = publication.epoch(),
                "test hook: pausing inside the publish transaction for {pause:?} \
                 (DKG_TEST_PAUSE_BEFORE_COMMIT_MS)"
            );
            tokio::time::sleep(pause).await;
        }
        let p = producer.clone();
        let committed =
            tokio::task::spawn_blocking(move || p.commit_transaction(TXN_TIMEOUT)).await;
        StepError::check("commit_transaction", committed)
    }

    /// Publish `assignment` in one transaction. `generation` is the ownership generation (for fencing).
    pub async fn publish(
        &mut self,
        assignment: &Assignment,
        generation: u64,
    ) -> Result<(), PublishFailure> {
        self.commit(Publication::Assignment(assignment), generation)
            .await
    }

    /// Write the control topic's generation record `id` in one transaction (`--control-format
    /// v2`, when none is in force). `generation` is the ownership generation (for fencing).
    pub async fn write_generation(
        &mut self,
        id: &str,
        generation: u64,
    ) -> Result<(), PublishFailure> {
        self.commit(Publication::Generation(id), generation).await
    }

    /// The format the publisher writes.
    pub fn format(&self) -> ControlFormat {
        self.format
    }

    async fn commit(
        &mut self,
        publication: Publication<'_>,
        generation: u64,
    ) -> Result<(), PublishFailure> {
        let Some(producer) = self.producer.clone() else {
            return Err(PublishFailure::Retry("no active producer".into()));
        };
        let result = self.transaction(&producer, publication).await;
        let Err(StepError {
            step,
            code,
            text: err,
        }) = result
        else {
            return Ok(());
        };
        // A fenced producer reports a fatal error on the client, whatever call noticed it first.
        let fatal = producer.client().fatal_error();
        let fenced =
            fatal.as_ref().is_some_and(|(c, _)| is_fencing(*c)) || code.is_some_and(is_fencing);
        if fenced {
            self.producer = None;
            self.state = PublisherState::Fenced { generation };
            tracing::error!(
                transactional_id = %self.transactional_id,
                epoch = publication.epoch(),
                "FENCED: another dkg-sampler holds transactional.id {:?} and publishes {}; this \
                 instance stops publishing (it keeps consuming and serving metrics) until its consumer group \
                 gives it partition 0 again ({step}: {err})",
                self.transactional_id,
                publication.what()
            );
            return Err(PublishFailure::Fenced);
        }
        if let Some((code, reason)) = fatal {
            // Any other fatal error: drop the producer, re-initialise at the next interval.
            self.producer = None;
            self.state = PublisherState::Standby;
            return Err(PublishFailure::Retry(format!(
                "fatal producer error {code}: {reason} ({step}: {err})"
            )));
        }
        let p = producer.clone();
        let abort = tokio::task::spawn_blocking(move || p.abort_transaction(TXN_TIMEOUT)).await;
        if !matches!(abort, Ok(Ok(()))) {
            // Cannot tell the transaction state any more: start over with a new producer.
            self.producer = None;
            self.state = PublisherState::Standby;
        }
        Err(PublishFailure::Retry(format!("{step}: {err}")))
    }
}

/// The test hook's pause (module docs, "Test hook"); None unless `DKG_TEST_PAUSE_BEFORE_COMMIT_MS` is a
/// number.
fn test_pause_before_commit() -> Option<Duration> {
    std::env::var("DKG_TEST_PAUSE_BEFORE_COMMIT_MS")
        .ok()?
        .trim()
        .parse()
        .ok()
        .map(Duration::from_millis)
}

/// A failed step of a transaction.
#[derive(Debug)]
struct StepError {
    step: &'static str,
    code: Option<RDKafkaErrorCode>,
    text: String,
}

impl StepError {
    fn check(
        step: &'static str,
        joined: Result<rdkafka::error::KafkaResult<()>, tokio::task::JoinError>,
    ) -> Result<(), StepError> {
        match joined {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(StepError {
                step,
                code: e.rdkafka_error_code(),
                text: e.to_string(),
            }),
            Err(e) => Err(StepError {
                step,
                code: None,
                text: format!("task failed: {e}"),
            }),
        }
    }
}

/// A new control-topic generation id (`docs/spec.md` 6.4): 32 lowercase hex digits from the
/// operating system's randomness (rand's thread generator, seeded by `getrandom`), so two
/// incarnations of a control topic never share one.
pub fn new_generation_id() -> String {
    format!("{:032x}", rand::random::<u128>())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use dkg_kafka_core::assignment::{GENERATION_KEY, Retraction, generation_record};
    use dkg_testkit::fixtures::assignment;

    use super::*;

    #[test]
    fn generation_ids_are_valid_and_distinct() {
        let ids: std::collections::HashSet<String> = (0..64).map(|_| new_generation_id()).collect();
        assert_eq!(ids.len(), 64, "random ids do not repeat");
        for id in &ids {
            assert!(
                generation_record(id).is_ok(),
                "{id} is 32 lowercase hex digits"
            );
        }
    }

    #[test]
    fn a_retraction_floor_and_the_generation_reach_the_state() {
        let g = new_generation_id();
        let mut book = AssignmentBook::new();
        let state = Mutex::new(ControlState::default());
        let doc = assignment("t", 4, 3, (0..8).map(|b| b % 4).collect(), &[])
            .with_generation(&g)
            .unwrap();
        let retraction = Retraction {
            topic: "t".into(),
            epoch: 9,
            generation: Some(g.clone()),
            created_at_ms: 1,
        };
        let records: [(&str, Vec<u8>); 3] = [
            (GENERATION_KEY, generation_record(&g).unwrap()),
            ("t", doc.to_json_compact()),
            ("t", retraction.to_json()),
        ];
        for (offset, (key, value)) in records.iter().enumerate() {
            let update = book.apply(Some(key.as_bytes()), Some(value));
            let record = ControlRecord {
                offset: offset as i64,
                update,
            };
            apply_update(&state, "t", &record);
            fold_book(&state, "t", &book);
        }
        let s = state.into_inner().unwrap();
        assert!(s.current.is_none(), "retracted");
        assert_eq!(
            s.max_epoch, 9,
            "the floor, above the last assignment's epoch 3"
        );
        assert_eq!(s.generation.as_deref(), Some(g.as_str()));
        assert_eq!(s.end_offset, 3);
        assert_eq!(s.records, 3);
        assert!(!s.rewound, "offsets only grew");
    }

    /// The live reader of a recreated control topic starts again at offset 0 (librdkafka resets an
    /// out-of-range position), possibly at a document this sampler published into the new log, so
    /// the new log's end need not be below what was read: the smaller offset is the sign.
    #[test]
    fn a_record_below_the_offset_read_marks_the_view_rewound() {
        let state = Mutex::new(ControlState::default());
        let unchanged = |offset| ControlRecord {
            offset,
            update: ControlUpdate::Unchanged { topic: "t".into() },
        };
        for offset in [0, 1, 3, 4] {
            apply_update(&state, "t", &unchanged(offset));
        }
        assert!(
            !state.lock().unwrap().rewound,
            "offsets grew (3: after a transaction marker)"
        );
        apply_update(&state, "t", &unchanged(0));
        let s = state.into_inner().unwrap();
        assert!(s.rewound, "offset 0 after 4: a new log");
        assert_eq!(s.end_offset, 1);
    }
}
