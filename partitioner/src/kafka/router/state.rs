//! The router's state: per topic, the partition view, the current and previous assignment and the
//! latest transition (for moved keys); the lock-free lookup on the hot path; applying control-topic
//! updates. See `docs/architecture.md`.

use super::*;

/// Partition count and per-partition counters, swapped together.
pub(super) struct PartitionView {
    /// 0 = not known (yet).
    pub(super) count: u32,
    pub(super) counters: Box<[IntCounter]>,
}

impl PartitionView {
    #[inline]
    pub(super) fn count_record(&self, partition: u32) {
        if let Some(c) = self.counters.get(partition as usize) {
            c.inc();
        }
    }
}

/// Where keys lived before an assignment of a topic was adopted.
#[derive(Clone, Debug)]
pub(super) enum Before {
    /// Not known (the assignment was the first one read at start-up): nothing counts as moved,
    /// except inside a tracked stamp window, where every key does (the producer cannot tell which
    /// keys the groups may still be moving).
    Unknown,
    /// Kafka's default placement (no assignment was in effect).
    Hash,
    /// The previous assignment.
    Assignment(Arc<Assignment>),
}

impl Before {
    /// The epoch of this placement (0: Kafka's default placement, or not known).
    pub(super) fn epoch(&self) -> u64 {
        match self {
            Before::Assignment(a) => a.epoch(),
            Before::Unknown | Before::Hash => 0,
        }
    }

    /// Whether `key`, now on `partition` of `count`, lived elsewhere under this placement.
    #[inline]
    fn moved(&self, key: &[u8], partition: u32, count: u32, tracked: bool) -> bool {
        match self {
            // Split in the previous assignment (`docs/spec.md` 4.6): its records were spread over
            // several partitions, so a whole record of it now always counts as moved (the
            // consumer then holds it until every old part has drained).
            Before::Assignment(b) if b.partitions() == count && b.split_of(key).is_some() => true,
            Before::Unknown => tracked,
            Before::Hash => kafka_partition(key, count) != partition,
            Before::Assignment(b) if b.partitions() == count => b.partition_for(key) != partition,
            Before::Assignment(_) => kafka_partition(key, count) != partition,
        }
    }
}

/// Placements beyond this many compared per record collapse into one unknown placement (every
/// record counts as moved until the windows close: bounded cost per record and memory).
const MAX_BEFORES: usize = 8;

/// Open windows kept per topic at most.
const MAX_OPEN: usize = 64;

/// The epoch transitions of a topic whose stamp windows are open (`dkg_kafka_protocol::window`,
/// `docs/spec.md` 9.2.2). Stored before the assignment they lead to, and used by a route only when
/// `to_epoch` equals the epoch of the assignment it loaded, so a route racing an adoption never
/// pairs an assignment with the wrong predecessors (it counts the key as moved).
///
/// A record of the current epoch counts as moved when its key's home differs from its home under
/// any placement in `befores`: the predecessor of every window that was open when the epoch was
/// adopted, and its own. The set is fixed for the epoch; only closing the current epoch's window
/// clears it (closing older windows does not), so a producer stops stamping a key only once the
/// groups settled the epoch it last stamped it in, which the consumers' rule for unstamped
/// records relies on.
///
/// Without tracked windows (a producer outside the ordering protocol) only the latest transition
/// is kept and never closed: keys it moved count as moved for as long as its epoch is current.
#[derive(Debug)]
pub(super) struct Transition {
    pub(super) to_epoch: u64,
    /// Empty once the current epoch's window closed (nothing counts as moved).
    pub(super) befores: Vec<Before>,
    /// The open windows, oldest first.
    pub(super) open: Vec<OpenWindow>,
    /// Windows are closed by an ordering producer's task.
    pub(super) tracked: bool,
}

impl Transition {
    pub(super) fn new(to_epoch: u64, before: Before) -> Self {
        Self {
            to_epoch,
            open: vec![OpenWindow {
                epoch: to_epoch,
                // Not known (start-up): 0, so every group with progress is followed (a group
                // left behind long ago then keeps this one window open to its bound).
                prev: before.epoch(),
            }],
            befores: vec![before],
            tracked: false,
        }
    }

    /// The transition to `to_epoch` from `before`, with the windows of `prev` that are still
    /// open carried over, and their placements: a key stamped in an open window's epoch stays
    /// stamped until that window closes, so every placement compared there is compared here
    /// too. An epoch that does not follow its predecessor directly (this producer never adopted
    /// the ones between, e.g. it rejected their documents) adds an unknown placement: every key
    /// counts as moved until the window closes. Beyond [`MAX_BEFORES`] placements they collapse
    /// into one unknown placement (the same stamps, bounded memory).
    pub(super) fn tracked(to_epoch: u64, before: Before, prev: Option<&Transition>) -> Self {
        // Epoch numbers may have gaps (`docs/spec.md` 6.2), which then cost stamps, not order.
        let skipped = match &before {
            Before::Assignment(b) => to_epoch > b.epoch() + 1,
            // After a retraction, or documents rejected here that others may have adopted.
            Before::Hash => to_epoch > 1,
            Before::Unknown => false,
        };
        let mut next = Self::new(to_epoch, before);
        next.tracked = true;
        if skipped {
            next.befores.push(Before::Unknown);
        }
        if let Some(prev) = prev.filter(|p| !p.open.is_empty()) {
            let mut befores = prev.befores.clone();
            befores.append(&mut next.befores);
            next.befores = befores;
            let mut open = prev.open.clone();
            open.append(&mut next.open);
            next.open = open;
        }
        if next.befores.len() > MAX_BEFORES {
            next.befores = vec![Before::Unknown];
        }
        // Windows that cannot close (a topic without lease, a count never known) stay bounded:
        // the oldest go (every key is stamped by then, and closing the newest needs every
        // followed group to have settled it, which settles the older ones too).
        if next.open.len() > MAX_OPEN {
            let excess = next.open.len() - MAX_OPEN;
            next.open.drain(..excess);
            next.befores = vec![Before::Unknown];
        }
        next
    }

    /// Whether `key`, placed on `partition` by the assignment of `epoch`, counts as moved.
    #[inline]
    pub(super) fn moved(&self, epoch: u64, key: &[u8], partition: u32, count: u32) -> bool {
        if self.to_epoch != epoch {
            return true;
        }
        self.befores
            .iter()
            .any(|b| b.moved(key, partition, count, self.tracked))
    }

    /// Whether a window of `epoch` is open.
    pub(super) fn is_open(&self, epoch: u64) -> bool {
        self.open.iter().any(|w| w.epoch == epoch)
    }

    /// This transition with the windows of epochs up to `upto` closed.
    pub(super) fn closed_upto(&self, upto: u64) -> Self {
        Self {
            to_epoch: self.to_epoch,
            befores: if upto >= self.to_epoch {
                Vec::new()
            } else {
                self.befores.clone()
            },
            open: self
                .open
                .iter()
                .copied()
                .filter(|w| w.epoch > upto)
                .collect(),
            tracked: self.tracked,
        }
    }
}

/// One data topic's routing state.
pub(super) struct TopicState {
    pub(super) name: Arc<str>,
    pub(super) assignment: ArcSwapOption<Assignment>,
    pub(super) transition: ArcSwapOption<Transition>,
    pub(super) view: ArcSwap<PartitionView>,
    /// Resolved on first use, so topics that are only on the control topic export no series.
    pub(super) routes: OnceLock<RouteCounters>,
    /// Records are produced to it from this process: its partition count is kept current and
    /// its metrics exported.
    pub(super) in_use: AtomicBool,
}

impl TopicState {
    pub(super) fn new(name: &str) -> Self {
        Self {
            name: Arc::from(name),
            assignment: ArcSwapOption::empty(),
            transition: ArcSwapOption::empty(),
            view: ArcSwap::from_pointee(PartitionView {
                count: 0,
                counters: Box::new([]),
            }),
            routes: OnceLock::new(),
            in_use: AtomicBool::new(false),
        }
    }

    /// Route `key` given the topic's partition count `count` (0 = unknown); with `track_moves`,
    /// also tell whether the key moved in the latest transition.
    #[inline]
    pub(super) fn route(
        &self,
        key: &[u8],
        count: u32,
        view: &PartitionView,
        routes: &RouteCounters,
        track_moves: bool,
    ) -> Routing {
        if count == 0 {
            routes.fallback.inc();
            return Routing::UNPLACED;
        }
        let assignment = self.assignment.load();
        if let Some(a) = assignment.as_deref()
            && a.partitions() == count
        {
            let (p, route) = a.route(key);
            // Guaranteed by `Assignment`; re-checked (one compare) so that no bug elsewhere can
            // ever send a record to a partition that does not exist.
            if p < count {
                let route = match route {
                    Route::Heavy => RouteKind::Heavy,
                    Route::Bucket => RouteKind::Bucket,
                    Route::Split => RouteKind::Split,
                };
                match route {
                    RouteKind::Heavy => routes.heavy.inc(),
                    RouteKind::Split => routes.split.inc(),
                    _ => routes.bucket.inc(),
                }
                view.count_record(p);
                // Split records are never stamped (`docs/spec.md` 4.6): never "moved".
                let moved = track_moves
                    && route != RouteKind::Split
                    && self
                        .transition
                        .load()
                        .as_deref()
                        .is_none_or(|t| t.moved(a.epoch(), key, p, count));
                return Routing {
                    partition: Some(p as i32),
                    epoch: Some(a.epoch()),
                    route,
                    moved,
                };
            }
        }
        let p = kafka_partition(key, count);
        routes.fallback.inc();
        view.count_record(p);
        Routing {
            partition: Some(p as i32),
            epoch: None,
            route: RouteKind::Fallback,
            moved: false,
        }
    }

    pub(super) fn status(&self) -> TopicStatus {
        let a = self.assignment.load();
        let count = self.view.load().count;
        TopicStatus {
            topic: Arc::clone(&self.name),
            epoch: a.as_deref().map_or(0, Assignment::epoch),
            created_at_ms: a.as_deref().map(Assignment::created_at_ms),
            in_effect: a
                .as_deref()
                .is_some_and(|a| count != 0 && a.partitions() == count),
        }
    }

    /// Install a new partition count (background task only).
    pub(super) fn set_partition_count(&self, count: u32, metrics: &ProducerMetrics) {
        let old = self.view.load();
        if old.count == count {
            return;
        }
        let counters: Box<[IntCounter]> = (0..count.max(old.counters.len() as u32))
            .map(|p| {
                old.counters
                    .get(p as usize)
                    .cloned()
                    .unwrap_or_else(|| metrics.partition_counter(&self.name, p))
            })
            .collect();
        // Every change after the first known count moves keys outside the ordering guarantee. Counted
        // before the count is installed, so whoever sees the new count sees the change counted.
        let changes = metrics.count_changes(&self.name);
        if old.count != 0 {
            changes.inc();
        }
        self.view.store(Arc::new(PartitionView { count, counters }));
        let assignment = self.assignment.load();
        match assignment.as_deref() {
            Some(a) if old.count != 0 && a.partitions() != count => warn!(
                topic = %self.name,
                partitions = count,
                previous_partitions = old.count,
                epoch = a.epoch(),
                assignment_partitions = a.partitions(),
                "partition count changed: Kafka's default placement until an assignment for {count} \
                 partitions is published"
            ),
            _ if old.count != 0 => info!(
                topic = %self.name,
                partitions = count,
                previous_partitions = old.count,
                "partition count changed"
            ),
            _ => debug!(topic = %self.name, partitions = count, "partition count known"),
        }
    }
}

pub(super) type TopicMap = HashMap<Arc<str>, Arc<TopicState>, ahash::RandomState>;

/// State shared by the handles and the background tasks.
pub(super) struct Shared {
    pub(super) control_topic: String,
    pub(super) topics: ArcSwap<TopicMap>,
    pub(super) metrics: ProducerMetrics,
    /// Topics whose partition count must be fetched now.
    pub(super) metadata_requests: mpsc::UnboundedSender<Arc<str>>,
    pub(super) keyless: AtomicU32,
    /// Compute [`Routing::moved`].
    pub(super) track_moves: bool,
    /// Stamp windows are tracked and closed by an ordering producer's task
    /// ([`DkgRouterBuilder::track_windows`]).
    pub(super) track_windows: bool,
    /// Bumped after every adoption or retraction (for the ordering task of the producer).
    pub(super) adoptions: watch::Sender<u64>,
}

impl Shared {
    /// The state of `topic`, created if missing. Lock-free (copy-on-write of the map), allocates
    /// only when the topic is new.
    pub(super) fn topic(&self, topic: &str) -> Arc<TopicState> {
        if let Some(s) = self.topics.load().get(topic) {
            return Arc::clone(s);
        }
        let fresh = Arc::new(TopicState::new(topic));
        self.topics.rcu(|map| {
            if map.contains_key(topic) {
                return Arc::clone(map);
            }
            let mut next = TopicMap::clone(map);
            next.insert(Arc::clone(&fresh.name), Arc::clone(&fresh));
            Arc::new(next)
        });
        // Whoever won the race, the map now holds the one state for `topic`.
        self.topics.load().get(topic).map_or(fresh, Arc::clone)
    }

    /// Mark `state` as produced to and return its route counters; the first time, resolve the
    /// counters and (with `fetch`) ask for its partition count.
    #[inline]
    pub(super) fn use_topic<'s>(&self, state: &'s TopicState, fetch: bool) -> &'s RouteCounters {
        let routes = state
            .routes
            .get_or_init(|| self.metrics.route_counters(&state.name));
        if !state.in_use.load(Ordering::Relaxed)
            && !state.in_use.swap(true, Ordering::AcqRel)
            && fetch
        {
            // Unbounded send: never blocks; fails only once the router is shut down.
            let _ = self.metadata_requests.send(Arc::clone(&state.name));
        }
        routes
    }

    /// Apply a control-topic update. `live`: read after the start-up catch-up (log at info);
    /// during the catch-up the history is replayed quietly and summarised once.
    pub(super) fn apply(&self, update: &ControlUpdate, live: bool) {
        match update {
            ControlUpdate::Adopted(a) => {
                let state = self.topic(a.topic());
                let count = state.view.load().count;
                let before = match state.assignment.load_full() {
                    Some(prev) => Before::Assignment(prev),
                    // Read live: routing was Kafka's default placement until now. At start-up
                    // nothing was routed yet: the predecessor is unknown.
                    None if live => Before::Hash,
                    None => Before::Unknown,
                };
                let next = if self.track_windows {
                    // The windows still open stay open: their moves are not settled yet.
                    Transition::tracked(a.epoch(), before, state.transition.load().as_deref())
                } else {
                    Transition::new(a.epoch(), before)
                };
                state.transition.store(Some(Arc::new(next)));
                state.assignment.store(Some(Arc::clone(a)));
                self.adoptions.send_modify(|n| *n += 1);
                if !live {
                    return;
                }
                info!(
                    control_topic = %self.control_topic,
                    topic = a.topic(),
                    epoch = a.epoch(),
                    partitions = a.partitions(),
                    heavy_keys = a.heavy().len(),
                    buckets = a.buckets(),
                    in_effect = count == a.partitions(),
                    "adopted DKG assignment"
                );
                if count != 0 && count != a.partitions() {
                    warn!(
                        topic = a.topic(),
                        epoch = a.epoch(),
                        assignment_partitions = a.partitions(),
                        topic_partitions = count,
                        "assignment is for a different partition count than the topic has: \
                         Kafka's default placement until they match"
                    );
                }
            }
            ControlUpdate::Retracted { topic } => {
                if let Some(state) = self.topics.load().get(topic.as_str()) {
                    state.assignment.store(None);
                    state.transition.store(None);
                }
                self.adoptions.send_modify(|n| *n += 1);
                if !live {
                    return;
                }
                info!(
                    control_topic = %self.control_topic,
                    topic = %topic,
                    "assignment retracted: Kafka's default placement"
                );
            }
            ControlUpdate::Rejected { topic, reason, .. } => {
                // Labelled by the record's topic only for this producer's own topics (bounded).
                let map = self.topics.load();
                let label = topic
                    .as_deref()
                    .and_then(|t| map.get(t))
                    .filter(|s| s.routes.get().is_some())
                    .map_or(OTHER_TOPIC, |s| &*s.name);
                self.metrics.rejected(label, *reason);
            }
            // The book dropped every topic (a recreated control topic, spec 6.4): so does routing.
            ControlUpdate::Reset { .. } => {
                for state in self.topics.load().values() {
                    state.assignment.store(None);
                    state.transition.store(None);
                }
                self.adoptions.send_modify(|n| *n += 1);
            }
            ControlUpdate::Unchanged { .. } => {}
        }
    }

    pub(super) fn statuses(&self) -> Vec<TopicStatus> {
        self.topics
            .load()
            .values()
            .filter(|s| s.in_use.load(Ordering::Acquire))
            .map(|s| s.status())
            .collect()
    }
}
