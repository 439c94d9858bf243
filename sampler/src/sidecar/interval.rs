//! One interval of the sidecar, in four stages:
//!
//! 1. **measure** ([`Driver::measure`]): re-read the partition count, take the consumer's snapshot of the
//!    window, count what this member consumed and on which partitions;
//! 2. **merge** ([`Driver::merge`]): ship this member's window to its peers; the leader (the owner of
//!    partition 0, or a standalone `--once` / `--dry-run`) merges the fresh peers' windows into the
//!    topic-wide view and checks that every partition is covered;
//! 3. **decide** ([`Driver::decide`]): take the transactional id, choose the next epoch, build a fresh
//!    assignment and let the hysteresis of [`super::decide`] compare it with the current one;
//! 4. **publish** ([`Driver::publish`]): commit it (a transaction on the control topic) or, with
//!    `--dry-run`, only serve it.
//!
//! Each stage returns `Ok(None)` to end the interval early (nothing to do, or not this member's job) and
//! `Err(RunError::Once(..))` where `--once` must fail. The arithmetic of the stages is pure, in
//! [`super::calc`], with unit tests. Taking the publisher's role (the transactional id, the catch-up
//! read, the control topic's generation) is in the child module `publisher_role`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use dkg_kafka_core::assignment::Assignment;
use dkg_kafka_core::dkg::{Build, Sketch, imbalance};
use rdkafka::admin::AdminClient;
use rdkafka::client::DefaultClientContext;
use tokio::sync::watch;

use super::calc::{
    Rebuild, candidate, current_state, decay_window_shares, key_grouping_bound, least_moving,
    next_epoch, owned_partitions, partition_rates, split_keys_shown, top_key_shares, uncovered,
};
use super::cluster::{self, MergedView, Peers, ShippedSketch, Shipper};
use super::decide::{self, Current, Decision, KeepReason, PublishReason, Situation};
use super::http::HttpState;
use super::ingest::{Command, ConsumerHandle, Ownership, Shared};
use super::metadata::{TopicProblem, topic_partitions};
use super::metrics::SamplerMetrics;
use super::misplaced;
use super::publish::{
    ControlState, ControlView, PublishFailure, Publisher, PublisherState, new_generation_id,
};
use super::settings::Settings;
use super::window::{IntervalSnapshot, Weight};
use super::{RunError, now_ms};
use crate::cli::ControlFormat;

mod publisher_role;

/// The clients the driver works with (made by [`super::startup`]).
pub(super) struct Clients {
    pub admin: Arc<AdminClient<DefaultClientContext>>,
    pub consumer: ConsumerHandle,
    pub shared: Arc<Shared>,
    pub control: ControlView,
    pub peers: Arc<Peers>,
    /// Sampler groups only.
    pub shipper: Option<Shipper>,
    pub publisher: Publisher,
}

/// The per-interval logic.
pub(super) struct Driver<'a> {
    s: &'a Settings,
    http: Arc<HttpState>,
    io: Clients,
    /// The partition count the window learns for.
    partitions: u32,
    /// Decayed per-partition load (leader's view, in the unit of `--weight`), for the share gauges.
    partition_window: BTreeMap<u32, f64>,
    /// The partition count changed: restart the window once the group consumes every partition.
    awaiting_coverage: bool,
    /// The control topic was read to its end since this instance took the transactional id.
    caught_up: bool,
    /// "Partitions not consumed" was logged for the current gap.
    uncovered_logged: bool,
    /// `--dry-run`: what it would have published last.
    dry_current: Option<Arc<Assignment>>,
    /// When the window started learning for the current partition count (the first epoch's wait).
    learning_since: Instant,
    last_published: u64,
    publishes: u64,
    intervals: u64,
    /// Decisions in a row kept back because the sampler read behind the log (`decide::CatchingUp`).
    catch_up_deferrals: u32,
    /// `--once` intervals that ended short of `--min-samples` (see [`ONCE_MAX_INTERVALS`]).
    once_short: u32,
    /// The control topic holds the largest epoch for the topic: why nothing is published (logged
    /// once, shown on `/healthz`).
    exhausted: Option<String>,
}

/// How an interval ended.
pub(super) enum Tick {
    Continue,
    /// `--once` is done.
    Done,
}

/// What this member measured in the interval.
struct Measured {
    snap: IntervalSnapshot,
    /// When the interval ended (unix millis).
    now: u64,
    /// Length of the interval in seconds (at least 1 ms).
    elapsed: f64,
    ownership: Ownership,
    /// The partitions this member reports on.
    owned: Vec<u32>,
    /// Records per second on each owned (or observed) partition.
    own_rates: BTreeMap<u32, f64>,
    /// Bytes per second likewise.
    own_byte_rates: BTreeMap<u32, f64>,
}

/// A fresh assignment the hysteresis chose to publish.
struct Plan {
    build: Build,
    epoch: u64,
    reason: PublishReason,
    fresh_imbalance: f64,
    /// Predicted imbalance the publish removes (the current assignment's minus the plan's; 0 without
    /// a predictable current assignment).
    gained: f64,
    /// This instance holds the transactional id (always false with `--dry-run`, which needs none).
    may_publish: bool,
}

/// `--once` samples up to this many intervals until the window holds `--min-samples`: a rebalance
/// or a slow first fetch can leave one interval short (a CI run's one-shot sampler lost its
/// partitions to a rebalance 3 s into its fresh group and had 376 records of a 5,000/s topic).
pub(super) const ONCE_MAX_INTERVALS: u32 = 5;

/// `--once` fails with `message`; otherwise the interval just ends.
fn end_or_fail<T>(once: bool, message: impl FnOnce() -> String) -> Result<Option<T>, RunError> {
    if once {
        Err(RunError::Once(message()))
    } else {
        Ok(None)
    }
}

impl<'a> Driver<'a> {
    pub(super) fn new(
        s: &'a Settings,
        http: Arc<HttpState>,
        clients: Clients,
        partitions: u32,
        dry_current: Option<Arc<Assignment>>,
    ) -> Self {
        Self {
            s,
            http,
            io: clients,
            partitions,
            partition_window: BTreeMap::new(),
            awaiting_coverage: false,
            caught_up: false,
            catch_up_deferrals: 0,
            once_short: 0,
            uncovered_logged: false,
            dry_current,
            learning_since: Instant::now(),
            last_published: 0,
            publishes: 0,
            intervals: 0,
            exhausted: None,
        }
    }

    /// This member's shipper (sampler groups), to retract its sketch at shutdown.
    pub(super) fn shipper(&self) -> Option<&Shipper> {
        self.io.shipper.as_ref()
    }

    fn metrics(&self) -> &SamplerMetrics {
        &self.http.metrics
    }

    fn topic(&self) -> &'a str {
        &self.s.args.cluster.topic
    }

    fn once(&self) -> bool {
        self.s.args.once
    }

    /// The current assignment: the control topic's, or with `--dry-run` what it would have published.
    fn current(&self, control: Option<Arc<Assignment>>) -> Option<Arc<Assignment>> {
        if self.s.args.dry_run {
            self.dry_current.clone()
        } else {
            control
        }
    }

    /// The publisher's state on `/healthz`; a fenced publisher or exhausted epochs are not
    /// "running" (503): nothing this instance does reaches the producers.
    fn show_publisher_state(&self) {
        let publisher = self.io.publisher.state();
        let id = self.io.publisher.transactional_id();
        let exhausted = self.exhausted.clone();
        self.http.update_health(|h| {
            h.publisher = publisher.as_str();
            if !matches!(h.state, "running" | "fenced" | "exhausted") {
                return;
            }
            let was = h.state;
            h.state = if let Some(why) = exhausted {
                h.message = Some(why);
                "exhausted"
            } else if matches!(publisher, PublisherState::Fenced { .. }) && h.role == "leader" {
                // The leader of its group, yet another instance holds the id: nobody in this
                // group publishes. (A member fenced in a leadership change is not reported.)
                h.message = Some(format!(
                    "fenced: another instance took the transactional id {id:?}; this one stopped \
                     publishing until its group makes it the leader again (restart it if no other \
                     sampler of the topic should run)"
                ));
                "fenced"
            } else {
                "running"
            };
            if was != "running" && h.state == "running" {
                h.message = None;
            }
        });
    }

    /// The next epoch would exceed 2^53 - 1: stop publishing, say so once, and report it.
    fn epochs_exhausted(&mut self, control: &ControlState) -> String {
        let topic = self.topic();
        let control_topic = &self.s.args.cluster.control_topic;
        let at = control.max_epoch_offset.map_or_else(
            || "a retraction document".to_owned(),
            |o| format!("offset {o}"),
        );
        let why = format!(
            "epochs exhausted: the control topic {control_topic:?} holds epoch {} for topic {topic:?} \
             at {at}, the largest (2^53 - 1), so no higher epoch can be published; this sampler \
             stops publishing. Recover with a new control-topic generation (docs/spec.md 6.2, 6.4): \
             delete and recreate {control_topic:?}, then restart this sampler with \
             --control-format v2",
            control.max_epoch
        );
        if self.exhausted.is_none() {
            tracing::error!(topic = %topic, epoch = control.max_epoch, "{why}");
            self.metrics()
                .epochs_exhausted
                .with_label_values(&[topic])
                .set(1.0);
        }
        self.exhausted = Some(why.clone());
        why
    }

    async fn snapshot(&self) -> Result<IntervalSnapshot, RunError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        // Before the first epoch nothing is published to drift away from, and every record is evidence
        // the first prediction needs (decide.rs, "The first epoch"): the window keeps it all.
        let decay = if self.current(self.io.control.state().current).is_none() {
            1.0
        } else {
            self.s.args.decay
        };
        if !self
            .io
            .consumer
            .send(Command::Snapshot { decay, reply: tx })
        {
            return Err(RunError::Setup("the consumer thread stopped".into()));
        }
        match tokio::time::timeout(Duration::from_secs(30), rx).await {
            Ok(Ok(snap)) => Ok(snap),
            Ok(Err(_)) => Err(RunError::Setup("the consumer thread stopped".into())),
            Err(_) => Err(RunError::Setup(
                "the consumer thread did not answer within 30 s".into(),
            )),
        }
    }

    /// Run intervals until `stop` fires (or `--once` is done).
    pub(super) async fn run(&mut self, stop: &mut watch::Receiver<bool>) -> Result<(), RunError> {
        // The first interval starts when the group has given us partitions, so it is a full interval.
        let waited = Instant::now();
        let mut warned = false;
        while self.io.shared.ownership().generation == 0 {
            if *stop.borrow() {
                return Ok(());
            }
            if !warned && waited.elapsed() > Duration::from_secs(30) {
                tracing::warn!(group_id = %self.s.group_id, "no partitions assigned after 30 s; still waiting for the consumer group");
                warned = true;
            }
            self.http.update_health(|h| {
                h.state = "waiting";
                h.message = Some("joining the consumer group".into());
            });
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(50)) => {}
                _ = stop.wait_for(|s| *s) => return Ok(()),
            }
        }
        if self.once() {
            // --once learns from one interval of records. After the assignment a consumer may need
            // seconds before its first fetch returns (1,000 partitions on a busy broker: a whole
            // 8 s interval once went by with 76 records), and those seconds would count against the
            // interval. Wait for the first record, at most one interval.
            let until = Instant::now() + self.s.interval;
            while !self.io.shared.first_record.load(Ordering::Relaxed) && Instant::now() < until {
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(20)) => {}
                    _ = stop.wait_for(|s| *s) => return Ok(()),
                }
            }
            tracing::debug!(
                waited_secs = waited.elapsed().as_secs_f64(),
                "--once: records flowing; the interval starts"
            );
        }
        let _ = self.snapshot().await?; // discard: start the first interval now
        self.learning_since = Instant::now();
        self.http.update_health(|h| {
            h.state = "running";
            h.message = None;
            h.partitions = self.partitions;
        });
        let mut ticker = tokio::time::interval_at(
            tokio::time::Instant::now() + self.s.interval,
            self.s.interval,
        );
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = ticker.tick() => {}
                _ = stop.wait_for(|s| *s) => return Ok(()),
            }
            let outcome = self.tick().await;
            self.show_publisher_state();
            match outcome {
                Ok(Tick::Continue) => {}
                Ok(Tick::Done) => return Ok(()),
                Err(e @ RunError::Once(_)) => return Err(e),
                Err(e) => {
                    tracing::warn!("interval skipped: {e}");
                    self.http.update_health(|h| h.message = Some(e.to_string()));
                }
            }
        }
    }

    /// One interval: measure -> merge -> decide -> publish.
    async fn tick(&mut self) -> Result<Tick, RunError> {
        let Some(measured) = self.measure().await? else {
            return Ok(Tick::Continue);
        };
        let Some(view) = self.merge(&measured).await? else {
            return Ok(Tick::Continue);
        };
        let Some(plan) = self.decide(&measured, &view).await? else {
            return Ok(Tick::Continue);
        };
        self.publish(&measured, plan).await
    }

    /// Stage 1: the partition count, the consumer's snapshot and this member's own observations.
    async fn measure(&mut self) -> Result<Option<Measured>, RunError> {
        let topic = self.topic();
        // Re-read the partition count; on a change the old window says nothing about the new placement.
        match topic_partitions(&self.io.admin, topic).await {
            Ok(k) if k != self.partitions => {
                tracing::warn!(topic = %topic, from = self.partitions, to = k, "partition count changed: starting a new window");
                self.io.consumer.send(Command::Reset { partitions: k });
                self.partitions = k;
                self.partition_window.clear();
                self.awaiting_coverage = true;
                self.learning_since = Instant::now();
                self.http.update_health(|h| h.partitions = k);
                return Ok(None);
            }
            Ok(_) => {}
            Err(TopicProblem::Missing) => {
                tracing::warn!(topic = %topic, "topic no longer exists; waiting for it");
                return Ok(None);
            }
            Err(TopicProblem::Unreachable(e) | TopicProblem::Other(e)) => {
                tracing::warn!(topic = %topic, "cannot read the topic's metadata ({e}); deciding on the known partition count");
            }
        }
        let snap = self.snapshot().await?;
        if snap.window.partitions() != self.partitions {
            // A reset is still in flight.
            return Ok(None);
        }
        self.intervals += 1;
        let m = self.metrics();
        m.records_consumed
            .with_label_values(&[topic])
            .inc_by(snap.consumed);
        m.records_sampled
            .with_label_values(&[topic])
            .inc_by(snap.sampled);
        m.records_skipped
            .with_label_values(&[topic])
            .inc_by(snap.skipped);
        m.observe_placement(&snap.placement);
        let warning = misplaced::warning(&snap.placement, self.s.args.misplaced_warn_ratio);
        if let Some(w) = &warning {
            tracing::warn!(topic = %topic, "{w}");
        }
        self.http.update_health(|h| h.warning = warning);
        let lag: Vec<(u32, f64)> = self
            .io
            .shared
            .lag()
            .into_iter()
            .map(|(p, l)| (p, l as f64))
            .collect();
        m.set_per_partition(&m.consumer_lag, &lag);
        if snap.keyless > 0 {
            tracing::debug!(topic = %topic, keyless = snap.keyless, "keyless records (counted as load, not learned)");
        }

        let ownership = self.io.shared.ownership();
        let elapsed = snap.elapsed.as_secs_f64().max(1e-3);
        let owned = owned_partitions(self.s.standalone, &ownership.partitions, self.partitions);
        let own_rates = partition_rates(&owned, &snap.partition_counts, elapsed);
        let own_byte_rates = partition_rates(&owned, &snap.partition_bytes, elapsed);
        Ok(Some(Measured {
            snap,
            now: now_ms(),
            elapsed,
            ownership,
            owned,
            own_rates,
            own_byte_rates,
        }))
    }

    /// Stage 2: ship this member's window; on the leader, the topic-wide view once every partition is
    /// covered by a fresh member.
    async fn merge(&mut self, me: &Measured) -> Result<Option<MergedView>, RunError> {
        let own = self.own_document(me);
        self.ship(&own).await;
        if !self.announce_role(me) {
            return Ok(None);
        }
        let fresh_peers =
            self.io
                .peers
                .fresh(&self.s.group_id, self.partitions, &self.s.member_id, me.now);
        let view = cluster::merge_view(&own, &fresh_peers);
        self.observe_metrics(&view, me.elapsed);
        self.http.update_health(|h| h.members = view.members);

        // Decide only on data from every partition: after a partition-count change the group needs a
        // metadata refresh and a rebalance to consume the new partitions, and a member that died without
        // leaving holds its partitions until its session times out.
        let topic = self.topic();
        let missing = uncovered(
            self.partitions,
            &me.ownership.partitions,
            fresh_peers.iter().map(|p| p.owned.as_slice()),
        );
        if !missing.is_empty() {
            let why = format!("not deciding: no fresh member consumes partitions {missing:?} yet");
            self.http.update_health(|h| h.message = Some(why));
            if !self.uncovered_logged {
                tracing::info!(topic = %topic, uncovered = ?missing, "not deciding: no fresh member consumes these partitions yet");
                self.uncovered_logged = true;
            }
            return Ok(None);
        }
        self.uncovered_logged = false;
        if self.awaiting_coverage {
            tracing::info!(topic = %topic, partitions = self.partitions, "every partition is consumed again: starting a clean window");
            self.awaiting_coverage = false;
            self.io.consumer.send(Command::Reset {
                partitions: self.partitions,
            });
            self.learning_since = Instant::now();
            return Ok(None);
        }
        Ok(Some(view))
    }

    /// This member's window and rates, as shipped to the sketches topic and merged by the leader.
    fn own_document(&self, me: &Measured) -> ShippedSketch {
        ShippedSketch {
            format: cluster::SKETCH_FORMAT.into(),
            version: cluster::SKETCH_VERSION,
            topic: self.topic().to_owned(),
            group_id: self.s.group_id.clone(),
            member_id: self.s.member_id.clone(),
            created_at_ms: me.now,
            interval_ms: u64::try_from(self.s.interval.as_millis()).unwrap_or(u64::MAX),
            owned: me.owned.clone(),
            partition_rates: me.own_rates.clone(),
            partition_byte_rates: me.own_byte_rates.clone(),
            weight: self.s.args.weight,
            window_samples: me.snap.window_samples,
            sketch: me.snap.window.clone(),
        }
    }

    /// Ship this member's document to the sketches topic (sampler groups only).
    async fn ship(&self, doc: &ShippedSketch) {
        let Some(shipper) = &self.io.shipper else {
            return;
        };
        if let Err(e) = shipper.ship(doc, Duration::from_secs(10)).await {
            tracing::warn!("could not ship this member's window: {e}");
        }
    }

    /// Report this member's role, epoch and ownership; `false` (after stepping down) unless it leads.
    fn announce_role(&mut self, me: &Measured) -> bool {
        let topic = self.topic();
        let current = self.current(self.io.control.state().current);
        let epoch_now = current.as_ref().map_or(0, |a| a.epoch());
        let m = self.metrics().clone();
        m.epoch.with_label_values(&[topic]).set(epoch_now as f64);
        let leader = self.s.standalone || me.ownership.owns_partition_zero();
        let consumer_error = self
            .io
            .shared
            .last_error()
            .map(|e| format!("consumer: {e}"));
        let intervals = self.intervals;
        self.http.update_health(|h| {
            h.owned = me.owned.clone();
            h.intervals = intervals;
            h.last_interval_ms = me.now;
            h.epoch = epoch_now;
            h.role = if leader { "leader" } else { "member" };
            h.message = consumer_error;
        });
        self.serve_assignment(current.as_deref());
        if !leader {
            m.clear_global();
            self.io.publisher.deactivate();
            let publisher = self.io.publisher.state().as_str();
            self.http.update_health(|h| {
                h.publisher = publisher;
                h.members = 0;
            });
        }
        leader
    }

    /// A `--once` interval ended short (`why`): whether to sample another one (logged), at most
    /// [`ONCE_MAX_INTERVALS`] in all.
    fn once_more(&mut self, why: &str) -> bool {
        self.once_short += 1;
        if self.once_short >= ONCE_MAX_INTERVALS {
            return false;
        }
        tracing::info!(
            topic = %self.topic(),
            intervals = self.once_short,
            max_intervals = ONCE_MAX_INTERVALS,
            "--once: {why}; sampling another interval"
        );
        true
    }

    /// Stage 3: whether to publish a fresh assignment, and which one.
    async fn decide(&mut self, me: &Measured, view: &MergedView) -> Result<Option<Plan>, RunError> {
        let topic = self.topic();
        let m = self.metrics().clone();
        if view.window.total() == 0 {
            m.predicted_imbalance.reset();
            let why = format!(
                "no keyed records in the interval of {:.1} s on topic {topic:?}; nothing published",
                me.elapsed
            );
            if !self.once() {
                // Once per interval, so an idle sidecar says why it never publishes.
                tracing::info!(topic = %topic, "{why}");
                self.http.update_health(|h| h.message = Some(why.clone()));
            } else if self.once_more(&why) {
                return Ok(None);
            }
            return end_or_fail(self.once(), || why);
        }
        if self.once() && view.window_samples < self.s.policy.min_samples as f64 {
            let why = format!(
                "only {:.0} sampled records in {} interval(s) (--min-samples {}); nothing published",
                view.window_samples,
                self.once_short + 1,
                self.s.policy.min_samples
            );
            if self.once_more(&why) {
                return Ok(None);
            }
            // Before taking the transactional id: a failed --once must not fence a running sampler.
            return Err(RunError::Once(why));
        }
        let Some((may_publish, control)) = self.take_publisher(me.ownership.generation).await
        else {
            return Ok(None);
        };
        let current = self.current(control.current.clone());
        // The max epoch includes a retraction document's floor (v2), so epochs never repeat.
        let Some(epoch) = next_epoch(
            control.max_epoch,
            self.last_published,
            current.as_ref().map_or(0, |a| a.epoch()),
        ) else {
            let why = self.epochs_exhausted(&control);
            return end_or_fail(self.once(), || why);
        };
        let window = &view.window;
        let build = window
            .build(topic, epoch, me.now, current.as_deref())
            .map_err(|e| RunError::Setup(format!("building an assignment: {e}")))?;
        let fresh = candidate(window, &build);
        let fresh_imbalance = fresh.imbalance;
        let current_state = current_state(current.as_deref(), self.partitions, window);
        self.show_predictions(window, &build, fresh_imbalance, current_state);
        m.window_noise
            .with_label_values(&[topic])
            .set(decide::fit_noise(self.partitions, view.window_samples));

        let catching_up = if self.catch_up_deferrals < decide::MAX_CATCH_UP_DEFERRALS {
            decide::CatchingUp::detect(self.io.shared.unread(), me.snap.consumed)
        } else {
            tracing::warn!(
                topic = %topic,
                "the sampler has read behind the log for {} intervals in a row: deciding anyway (a sampler that \
                 cannot keep up can read a share of each partition: --read-fraction)",
                self.catch_up_deferrals
            );
            None
        };
        let decision = decide::decide(
            &self.s.policy,
            &Situation {
                partitions: self.partitions,
                window_samples: view.window_samples,
                current: current_state,
                fresh_imbalance,
                force: self.once(),
                learned_secs: self.learning_since.elapsed().as_secs_f64(),
                catching_up,
            },
        );
        if matches!(decision, Decision::Keep(KeepReason::CatchingUp { .. })) {
            self.catch_up_deferrals += 1;
        } else {
            self.catch_up_deferrals = 0;
        }
        match decision {
            Decision::Keep(reason) => {
                let epoch_now = current.as_ref().map_or(0, |a| a.epoch());
                tracing::info!(topic = %topic, epoch = epoch_now, "keeping the current assignment: {reason}");
                if matches!(reason, KeepReason::Unconfident { .. }) {
                    self.http
                        .update_health(|h| h.message = Some(reason.to_string()));
                }
                end_or_fail(self.once(), || format!("{reason}; nothing published"))
            }
            Decision::Publish(reason) => {
                let (build, fresh_imbalance, gained) = match (reason, current.as_deref()) {
                    (PublishReason::Imbalanced { current: now, .. }, Some(previous)) => {
                        let (build, c) = least_moving(
                            &self.s.policy,
                            window,
                            Rebuild {
                                topic,
                                epoch,
                                now: me.now,
                                previous,
                            },
                            (build, fresh),
                            now,
                        )
                        .map_err(|e| RunError::Setup(format!("building an assignment: {e}")))?;
                        (build, c.imbalance, now - c.imbalance)
                    }
                    _ => (build, fresh_imbalance, 0.0),
                };
                // v2: the chosen build names the generation in force (placement is unchanged by it).
                let mut build = build;
                if self.io.publisher.format() == ControlFormat::V2
                    && let Some(g) = &control.generation
                {
                    build.assignment = build
                        .assignment
                        .with_generation(g)
                        .map_err(|e| RunError::Setup(format!("naming the generation: {e}")))?;
                }
                Ok(Some(Plan {
                    build,
                    epoch,
                    reason,
                    fresh_imbalance,
                    gained,
                    may_publish,
                }))
            }
        }
    }

    /// The predicted-imbalance and heavy-hitter gauges of this interval's candidates.
    fn show_predictions(&self, window: &Sketch, build: &Build, fresh: f64, current: Current) {
        let m = self.metrics();
        let topic = self.topic();
        let placement =
            |p: &str, v: f64| m.predicted_imbalance.with_label_values(&[topic, p]).set(v);
        placement("hash", imbalance(&window.predict_hash()));
        placement("fresh", fresh);
        match current {
            Current::Predicted { imbalance } => placement("current", imbalance),
            _ => {
                let _ = m
                    .predicted_imbalance
                    .remove_label_values(&[topic, "current"]);
            }
        }
        m.heavy_hitters
            .with_label_values(&[topic])
            .set(build.heavy_hitters as f64);
    }

    /// Stage 4: commit the plan to the control topic (with `--dry-run`: only serve it).
    async fn publish(&mut self, me: &Measured, plan: Plan) -> Result<Tick, RunError> {
        let topic = self.topic();
        let Plan {
            build,
            epoch,
            reason,
            fresh_imbalance,
            gained,
            may_publish,
        } = plan;
        if !may_publish && !self.s.args.dry_run {
            tracing::warn!(
                topic = %topic,
                publisher = self.io.publisher.state().as_str(),
                "would publish epoch {epoch} ({reason}) but this instance does not hold the transactional id {:?}",
                self.io.publisher.transactional_id()
            );
            self.show_publisher_state();
            return end_or_fail(self.once(), || {
                "not allowed to publish (fenced or no transactional id)".into()
            })
            .map(|_: Option<()>| Tick::Continue);
        }
        let assignment = Arc::new(build.assignment);
        let split = split_keys_shown(&assignment);
        if self.s.args.dry_run {
            tracing::info!(topic = %topic, epoch, moved_share = build.moved_share, gained_imbalance = gained, predicted_imbalance = fresh_imbalance, split_keys = %split, "dry run: would publish ({reason})");
            self.dry_current = Some(Arc::clone(&assignment));
        } else {
            let failure = match self
                .io
                .publisher
                .publish(&assignment, me.ownership.generation)
                .await
            {
                Ok(()) => {
                    tracing::info!(
                        topic = %topic,
                        epoch,
                        heavy_hitters = build.heavy_hitters,
                        split_keys = %split,
                        moved_share = build.moved_share,
                        gained_imbalance = gained,
                        predicted_imbalance = fresh_imbalance,
                        "published a new assignment ({reason})"
                    );
                    self.io.control.note_published(Arc::clone(&assignment));
                    None
                }
                Err(PublishFailure::Fenced) => Some("fenced by another instance".to_owned()),
                Err(PublishFailure::Retry(e)) => {
                    tracing::warn!(topic = %topic, "publishing epoch {epoch} failed ({e}); retrying next interval");
                    Some(format!("publishing failed: {e}"))
                }
            };
            if let Some(failure) = failure {
                self.show_publisher_state();
                return end_or_fail(self.once(), || failure).map(|_: Option<()>| Tick::Continue);
            }
        }
        self.last_published = epoch;
        self.publishes += 1;
        let m = self.metrics();
        m.publishes.with_label_values(&[topic]).inc();
        m.moved_share
            .with_label_values(&[topic])
            .set(build.moved_share);
        m.gained_imbalance.with_label_values(&[topic]).set(gained);
        m.split_keys
            .with_label_values(&[topic])
            .set(build.split_keys as f64);
        m.epoch.with_label_values(&[topic]).set(epoch as f64);
        self.serve_assignment(Some(&assignment));
        let publishes = self.publishes;
        let publisher = self.io.publisher.state().as_str();
        self.http.update_health(|h| {
            h.epoch = epoch;
            h.publishes = publishes;
            h.publisher = publisher;
        });
        Ok(if self.once() {
            Tick::Done
        } else {
            Tick::Continue
        })
    }

    fn serve_assignment(&self, a: Option<&Assignment>) {
        self.http.set_assignment(a.map(Assignment::to_json));
    }

    /// Observed and window metrics of the topic-wide view.
    fn observe_metrics(&mut self, view: &MergedView, elapsed: f64) {
        let m = self.metrics().clone();
        let topic = m.topic();
        let k = self.partitions;
        let known = |rates: &BTreeMap<u32, f64>| -> Vec<(u32, f64)> {
            rates
                .iter()
                .filter(|(p, _)| **p < k)
                .map(|(&p, &r)| (p, r))
                .collect()
        };
        let rate_vec = known(&view.partition_rates);
        let byte_vec = known(&view.partition_byte_rates);
        m.set_per_partition(&m.partition_rate, &rate_vec);
        m.set_per_partition(&m.partition_byte_rate, &byte_vec);
        // The load in the unit of --weight: the one the window, the shares and the predictions use.
        let load_vec = match self.s.args.weight {
            Weight::Records => &rate_vec,
            Weight::Bytes => &byte_vec,
        };
        // Observed imbalance over the partitions someone reported (all of them once the group is stable).
        let loads: Vec<f64> = load_vec.iter().map(|(_, r)| *r).collect();
        m.observed_imbalance
            .with_label_values(&[topic])
            .set(imbalance(&loads));
        let shares = decay_window_shares(
            &mut self.partition_window,
            load_vec,
            elapsed,
            self.s.args.decay,
            k,
        );
        m.set_per_partition(&m.partition_share, &shares);
        let window = &view.window;
        m.set_top_keys(&top_key_shares(window, usize::from(self.s.args.top_n)));
        m.bound
            .with_label_values(&[topic])
            .set(key_grouping_bound(window, k));
    }
}
