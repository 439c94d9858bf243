//! The rdkafka side of a [`DkgConsumer`]: state shared with librdkafka's callbacks ([`Shared`])
//! and the consumer context whose rebalance callback loads committed progress on assignment and
//! commits it on revocation. See `docs/architecture.md`.

use super::*;

/// What the rebalance callback leaves for `recv` (it runs inside rdkafka's poll and cannot await).
#[derive(Debug)]
pub(super) enum Note {
    Assigned(Vec<u32>),
    Revoked(Vec<u32>),
    Announce(handoff::Progress),
}

/// How often a partition may warn of commits that leave out their skip window.
pub(super) const WINDOW_WARN_EVERY: Duration = Duration::from_secs(60);

/// State shared with the rdkafka context.
pub(super) struct Shared {
    pub(super) topic: Arc<str>,
    pub(super) core: Mutex<Core<DkgMessage>>,
    pub(super) hooks: Arc<dyn ConsumerHooks>,
    /// Dropped without `close`: behave like a crash (no commits, no hooks).
    pub(super) abandoned: AtomicBool,
    /// `close` is leaving the group: partitions assigned meanwhile are not taken up.
    pub(super) closing: AtomicBool,
    /// The result of the last revocation commit (what `close` reports).
    pub(super) final_commit: Mutex<Option<String>>,
    pub(super) notes: Mutex<Vec<Note>>,
    pub(super) has_notes: AtomicBool,
    /// Last stable offset per partition, from librdkafka's statistics.
    pub(super) ends: Mutex<HashMap<u32, i64>>,
    /// When each partition last warned of a commit that left out its skip window.
    pub(super) window_warned: Mutex<HashMap<u32, Instant>>,
    pub(super) committed_timeout: Duration,
}

/// The locked core. Unlocking publishes the fast path's view of it ([`Core::publish`]): every
/// change goes through this guard, so the gates the consuming side reads without the lock are
/// always those of the latest state.
pub(super) struct CoreGuard<'a>(MutexGuard<'a, Core<DkgMessage>>);

impl Deref for CoreGuard<'_> {
    type Target = Core<DkgMessage>;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl DerefMut for CoreGuard<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

impl Drop for CoreGuard<'_> {
    fn drop(&mut self) {
        self.0.publish();
    }
}

impl Shared {
    pub(super) fn core(&self) -> CoreGuard<'_> {
        // A panic in a hook while locked poisons nothing we cannot continue from.
        CoreGuard(
            self.core
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }

    /// Warn that the commit of `s` leaves out its skip window (C7: its metadata did not fit
    /// `max_bytes`), at most once per [`WINDOW_WARN_EVERY`] and partition. The core counts it
    /// (`dkg_consumer_commit_windows_left_out_total`).
    pub(super) fn warn_window_left_out(&self, s: &Snapshot, max_bytes: usize) {
        let Some(unprocessed) = s.window_left_out else {
            return;
        };
        let now = Instant::now();
        {
            let mut warned = self
                .window_warned
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if warned
                .get(&s.partition)
                .is_some_and(|&at| now.duration_since(at) < WINDOW_WARN_EVERY)
            {
                return;
            }
            warned.insert(s.partition, now);
        }
        warn!(
            topic = %self.topic,
            partition = s.partition,
            offset = s.offset,
            unprocessed,
            max_bytes,
            "the commit of {}-{} at offset {} leaves out its skip window ({} unprocessed offsets \
             over the {}-byte metadata limit): a next owner would re-process the records \
             processed above {}; keep max_held_records below ~900",
            self.topic,
            s.partition,
            s.offset,
            unprocessed,
            max_bytes,
            s.offset
        );
    }

    pub(super) fn note(&self, note: Note) {
        self.notes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(note);
        self.has_notes.store(true, Ordering::Release);
    }

    pub(super) fn partitions_of(&self, tpl: &TopicPartitionList) -> Vec<u32> {
        let mut out: Vec<u32> = tpl
            .elements_for_topic(&self.topic)
            .iter()
            .filter_map(|e| u32::try_from(e.partition()).ok())
            .collect();
        out.sort_unstable();
        out
    }

    /// Committed metadata of `partitions` (bounded retries; on failure the partitions start
    /// without skip rules, logged as an error).
    pub(super) fn fetch_metas(
        &self,
        base: &BaseConsumer<DkgContext>,
        partitions: &[u32],
    ) -> HashMap<u32, (Option<i64>, Option<CommitMeta>)> {
        let mut tpl = TopicPartitionList::new();
        for &p in partitions {
            tpl.add_partition(&self.topic, p as i32);
        }
        for attempt in 1..=2 {
            match base.committed_offsets(tpl.clone(), self.committed_timeout) {
                Ok(committed) => {
                    return committed
                        .elements_for_topic(&self.topic)
                        .iter()
                        .filter_map(|e| {
                            let p = u32::try_from(e.partition()).ok()?;
                            debug!(topic = %self.topic, partition = p, offset = ?e.offset(),
                                metadata = e.metadata(), "committed at assignment");
                            let meta = match CommitMeta::parse(e.metadata()) {
                                None => None,
                                Some(Ok(m)) => Some(m),
                                Some(Err(why)) => {
                                    warn!(topic = %self.topic, partition = p, error = %why,
                                        "ignoring commit metadata this build does not read");
                                    None
                                }
                            };
                            let offset = match e.offset() {
                                Offset::Offset(o) => Some(o),
                                _ => None,
                            };
                            Some((p, (offset, meta)))
                        })
                        .collect();
                }
                Err(e) => {
                    warn!(topic = %self.topic, attempt, error = %e, "reading committed offsets");
                    std::thread::sleep(Duration::from_millis(200));
                }
            }
        }
        error!(
            topic = %self.topic,
            ?partitions,
            "could not read the committed metadata of newly assigned partitions: they start \
             without skip rules (records processed by their previous owner below its markers may \
             be processed again)"
        );
        partitions.iter().map(|&p| (p, (None, None))).collect()
    }

    pub(super) fn on_assign(&self, base: &BaseConsumer<DkgContext>, tpl: &TopicPartitionList) {
        let partitions = self.partitions_of(tpl);
        if partitions.is_empty() {
            return;
        }
        if self.closing.load(Ordering::Acquire) || self.abandoned.load(Ordering::Acquire) {
            // Leaving: librdkafka may still hand out partitions while the group rebalances around
            // the departure. Nothing will be fetched from them (the consumer queue is closed) and
            // their committed state stays as it is for their next owner.
            debug!(topic = %self.topic, ?partitions, "assigned while leaving: ignored");
            return;
        }
        let metas = self.fetch_metas(base, &partitions);
        {
            let now = handoff::mono_now();
            let mut core = self.core();
            core.set_now_ms(handoff::now_ms());
            if let Some(&max) = partitions.last()
                && max >= core.partitions()
            {
                core.set_partitions(max + 1, now);
            }
            for &p in &partitions {
                let (offset, meta) = metas
                    .get(&p)
                    .map_or((None, None), |(o, m)| (*o, m.as_ref()));
                core.assign(p, offset, meta, now);
            }
        }
        info!(topic = %self.topic, ?partitions, "partitions assigned");
        self.note(Note::Assigned(partitions.clone()));
        if !self.abandoned.load(Ordering::Acquire) {
            self.hooks.on_partitions_assigned(&partitions);
        }
    }

    pub(super) fn on_revoke(&self, base: &BaseConsumer<DkgContext>, tpl: &TopicPartitionList) {
        let partitions = self.partitions_of(tpl);
        if partitions.is_empty() {
            return;
        }
        let abandoned = self.abandoned.load(Ordering::Acquire);
        if !abandoned {
            self.hooks.on_partitions_revoked(&partitions);
        }
        let lost = base.assignment_lost();
        let now = handoff::mono_now();
        let mut core = self.core();
        if !abandoned && !lost {
            let mut commit = TopicPartitionList::new();
            let mut announce = Vec::new();
            for &p in &partitions {
                match core.snapshot(p) {
                    Some(Ok(s)) => {
                        self.warn_window_left_out(&s, core.config().max_metadata_bytes);
                        let mut e = commit.add_partition(&self.topic, p as i32);
                        if e.set_offset(Offset::Offset(s.offset)).is_ok() {
                            e.set_metadata(&s.metadata);
                            announce.push(core.progress_record(&s));
                        }
                    }
                    Some(Err(size)) => error!(
                        topic = %self.topic, partition = p, size,
                        "commit metadata too large: final offset not committed"
                    ),
                    None => {}
                }
            }
            if commit.count() > 0 {
                let result = base.commit(&commit, CommitMode::Sync);
                debug!(topic = %self.topic, offsets = ?commit.to_topic_map(), ok = result.is_ok(),
                    "final commit of revoked partitions");
                match &result {
                    Ok(()) => {
                        for a in announce {
                            self.note(Note::Announce(a));
                        }
                    }
                    Err(e) => warn!(topic = %self.topic, ?partitions, error = %e,
                        "final commit of revoked partitions failed (their records since the last \
                         commit will be delivered again)"),
                }
                *self
                    .final_commit
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) =
                    result.err().map(|e| e.to_string());
            }
        }
        for &p in &partitions {
            core.revoke(p, now);
        }
        drop(core);
        info!(topic = %self.topic, ?partitions, abandoned, lost, "partitions revoked");
        self.note(Note::Revoked(partitions));
    }
}

/// The rdkafka context of a [`DkgConsumer`]: handles rebalances (loading committed progress on
/// assignment, committing it on revocation) and collects partition ends from the statistics.
pub struct DkgContext {
    pub(super) shared: Arc<Shared>,
}

impl fmt::Debug for DkgContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DkgContext")
            .field("topic", &self.shared.topic)
            .finish_non_exhaustive()
    }
}

impl ClientContext for DkgContext {
    fn stats(&self, statistics: Statistics) {
        let Some(t) = statistics.topics.get(&*self.shared.topic) else {
            return;
        };
        let mut ends = self
            .shared
            .ends
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for (&p, part) in &t.partitions {
            if let Ok(p) = u32::try_from(p) {
                let end = if part.ls_offset >= 0 {
                    part.ls_offset
                } else {
                    part.hi_offset
                };
                if end >= 0 {
                    ends.insert(p, end);
                }
            }
        }
    }

    fn error(&self, error: KafkaError, reason: &str) {
        if error.rdkafka_error_code() == Some(RDKafkaErrorCode::PartitionEOF) {
            return;
        }
        warn!(topic = %self.shared.topic, error = %error, reason, "DKG consumer client error");
    }
}

impl ConsumerContext for DkgContext {
    /// Replaces rust-rdkafka's default, which asks librdkafka for the rebalance protocol on every
    /// event: like every group call, that one never returns when the event is served after the
    /// group handle terminated (librdkafka then drops the request unanswered; seen here as a hung
    /// `close`). The protocol is known (the builder sets cooperative-sticky), and once the handle
    /// has terminated no group call is made at all. [`DkgConsumer::close`] unsubscribes before
    /// closing so that its final revocation is served while the handle is alive.
    fn rebalance(
        &self,
        base: &BaseConsumer<Self>,
        err: RDKafkaRespErr,
        tpl: &mut TopicPartitionList,
    ) {
        if base.closed() {
            debug!(topic = %self.shared.topic, ?err, "rebalance event after close: ignored");
            return;
        }
        let result = match err {
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS => {
                self.shared.on_assign(base, tpl);
                base.incremental_assign(tpl)
            }
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS => {
                self.shared.on_revoke(base, tpl);
                base.incremental_unassign(tpl)
            }
            other => {
                let code: RDKafkaErrorCode = other.into();
                warn!(topic = %self.shared.topic, error = %code, "rebalance error");
                Ok(())
            }
        };
        if let Err(e) = result {
            warn!(topic = %self.shared.topic, error = %e, "incremental (un)assign failed");
        }
    }

    fn commit_callback(&self, result: KafkaResult<()>, _offsets: &TopicPartitionList) {
        if let Err(e) = result {
            warn!(topic = %self.shared.topic, error = %e, "offset commit failed");
        }
    }
}
