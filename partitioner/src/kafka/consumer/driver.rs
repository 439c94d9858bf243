//! The consuming loop of a [`DkgConsumer`]: fetch, hand records to the pure state machine
//! (`dkg_kafka_protocol::consumer::core`) or past it on the fast path, and the periodic housekeeping
//! (rebalance notes, lease expiry, flow control, gauges, garbage collection). See
//! `docs/architecture.md`.

use super::*;

/// Everything but the fetching handle (split so a borrowed record and the state can be used at
/// once).
pub(super) struct Inner {
    pub(super) consumer: Arc<StreamConsumer<DkgContext>>,
    pub(super) shared: Arc<Shared>,
    pub(super) topic: Arc<str>,
    pub(super) group: String,
    pub(super) member: String,
    pub(super) events: mpsc::UnboundedReceiver<BgEvent>,
    pub(super) writer: HandoffWriter,
    pub(super) metrics: ConsumerMetrics,
    /// The fast path: quiet partitions' records skip the core.
    pub(super) lanes: Lanes,
    /// The last record fetched had headers (see [`DkgMessage::from_borrowed`]).
    pub(super) fetched_headers: bool,
    pub(super) _tasks: Tasks,
    pub(super) commit_interval: Option<Duration>,
    pub(super) next_housekeeping: Instant,
    pub(super) next_auto_commit: Option<Instant>,
    pub(super) next_gc: Instant,
    pub(super) progress_retry_at: Option<Instant>,
    pub(super) since_housekeeping: u32,
    /// Epochs with a history record on the handoff topic (garbage collection).
    pub(super) history_keys: BTreeSet<u64>,
    pub(super) closed: bool,
}

/// What the state machine says before fetching.
pub(super) enum Step {
    /// A released record.
    Released(DkgMessage),
    /// Fetch from Kafka.
    Fetch,
}

impl Inner {
    /// The next record for the application (`recv` and `recv_borrowed`).
    pub(super) async fn next_record<'a>(
        consumer: &'a StreamConsumer<DkgContext>,
        inner: &mut Inner,
    ) -> Result<DkgRecord<'a>> {
        inner.processed();
        loop {
            if !inner.quiet()
                && let Step::Released(m) = inner.step().await
            {
                return Ok(DkgRecord::Released(m));
            }
            // Fast path: a record is already waiting in librdkafka's queue.
            {
                let fetch = consumer.recv();
                let mut fetch = std::pin::pin!(fetch);
                let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
                if let std::task::Poll::Ready(r) = fetch.as_mut().poll(&mut cx) {
                    match r {
                        Ok(m) => {
                            if let Some(record) = inner.on_fetched(m) {
                                return Ok(record);
                            }
                        }
                        Err(KafkaError::PartitionEOF(_)) => {}
                        Err(e) => return Err(e.into()),
                    }
                    continue;
                }
            }
            tokio::select! {
                biased;
                r = consumer.recv() => match r {
                    Ok(m) => {
                        if let Some(record) = inner.on_fetched(m) {
                            return Ok(record);
                        }
                    }
                    Err(KafkaError::PartitionEOF(_)) => {}
                    Err(e) => return Err(e.into()),
                },
                Some(ev) = inner.events.recv() => inner.apply_event(ev),
                () = tokio::time::sleep_until(inner.next_housekeeping.into()) => {
                    inner.since_housekeeping = HOUSEKEEPING_EVERY;
                }
            }
        }
    }

    /// The application's record is processed.
    #[inline]
    pub(super) fn processed(&mut self) {
        if self.lanes.processed() {
            self.shared.core().processed();
        }
    }

    /// Nothing to do before the next fetch, decided without the lock (the common case): the core
    /// published that it has nothing (see `lane`), and housekeeping is not due.
    #[inline]
    pub(super) fn quiet(&mut self) -> bool {
        self.since_housekeeping += 1;
        self.lanes.core_idle()
            && self.since_housekeeping < HOUSEKEEPING_EVERY
            && !self.shared.has_notes.load(Ordering::Acquire)
            && self.events.is_empty()
    }

    /// Everything before a fetch when [`Inner::quiet`] says there is something: progress due is
    /// committed, released records come out, housekeeping runs when due.
    pub(super) async fn step(&mut self) -> Step {
        loop {
            if !self.lanes.core_idle() {
                // One lock: progress to commit, or a released record.
                let now_due = self.progress_retry_at.is_none_or(|t| Instant::now() >= t);
                let (due, ready) = {
                    let mut core = self.shared.core();
                    let due = core.has_progress_due() && now_due;
                    (due, if due { None } else { core.next_ready() })
                };
                if due {
                    self.commit_progress().await;
                    continue;
                }
                if let Some(m) = ready {
                    self.lanes.took_from_core();
                    self.metrics.record(m.partition() as u32);
                    self.metrics.split(m.split_parts());
                    return Step::Released(m);
                }
            }
            if self.since_housekeeping >= HOUSEKEEPING_EVERY
                || self.shared.has_notes.load(Ordering::Acquire)
                || !self.events.is_empty()
            {
                self.since_housekeeping = 0;
                while let Ok(ev) = self.events.try_recv() {
                    self.apply_event(ev);
                }
                self.maintain();
                continue;
            }
            return Step::Fetch;
        }
    }

    /// A record fetched from Kafka: handed out (borrowed) or held (copied), or consumed.
    #[inline]
    pub(super) fn on_fetched<'a>(&mut self, m: BorrowedMessage<'a>) -> Option<DkgRecord<'a>> {
        let partition = u32::try_from(m.partition()).ok()?;
        // Read once per record: librdkafka parses (and allocates) on every call for a record
        // without headers, and that is most of what this wrapper costs per record.
        let h = message::dkg_headers(m.headers());
        self.fetched_headers = h.present;
        // Fast path: the partition is quiet, the core need not be asked (see `lane`).
        if self.lanes.take(partition, m.offset(), h.epoch) {
            let split = self.lanes.split_label(partition, m.key(), h.epoch);
            self.metrics.record(partition);
            self.metrics.split(split);
            return Some(DkgRecord::Fetched {
                msg: m,
                epoch: h.epoch,
                split,
            });
        }
        self.on_fetched_slow(m, partition, &h)
    }

    /// [`Inner::on_fetched`] when the core decides.
    #[inline(never)]
    pub(super) fn on_fetched_slow<'a>(
        &mut self,
        m: BorrowedMessage<'a>,
        partition: u32,
        h: &DkgHeaders,
    ) -> Option<DkgRecord<'a>> {
        let mut core = self.shared.core();
        let topic = &self.topic;
        // The label is the record's at arrival (what the core decides by), held or not.
        let split = core.label_record(partition, m.offset(), m.key(), h.epoch);
        let outcome = core.on_record(
            Incoming {
                partition,
                offset: m.offset(),
                key: m.key(),
                epoch: h.epoch,
                msg: || DkgMessage::from_borrowed(&m, topic, h.epoch, split, h.present),
            },
            handoff::mono_now,
        );
        self.lanes.refresh(partition, core.lane(partition));
        drop(core);
        match outcome {
            Outcome::Deliver => {
                self.lanes.took_from_core();
                self.metrics.record(partition);
                self.metrics.split(split);
                Some(DkgRecord::Fetched {
                    msg: m,
                    epoch: h.epoch,
                    split,
                })
            }
            Outcome::Held | Outcome::Skipped => None,
            Outcome::Unowned => {
                debug!(topic = %self.topic, partition, offset = m.offset(),
                    "record of a partition no longer owned: dropped (its next owner reads it)");
                None
            }
        }
    }

    pub(super) fn apply_event(&mut self, ev: BgEvent) {
        let now = handoff::mono_now();
        let changes = {
            let mut core = self.shared.core();
            apply(&mut core, ev, now, &mut self.history_keys);
            core.take_split_changes()
        };
        self.split_hooks(&changes);
    }

    /// Keys that became split or whole again: log and hooks (on the consuming task, before any
    /// record labelled by the new epoch is handed out).
    pub(super) fn split_hooks(&self, changes: &[SplitChange]) {
        for change in changes {
            if change.parts.is_empty() {
                info!(topic = %self.topic, epoch = change.epoch, key = %String::from_utf8_lossy(&change.key),
                    partition = ?change.partition, "split key whole again");
            } else {
                info!(topic = %self.topic, epoch = change.epoch, key = %String::from_utf8_lossy(&change.key),
                    parts = ?change.parts, "key split");
            }
            self.shared.hooks.on_split_change(change);
        }
    }

    /// Rebalance notes, and every [`HOUSEKEEPING`]: lease expiry, flow control, gauges, periodic
    /// commits, garbage collection.
    pub(super) fn maintain(&mut self) {
        self.serve_notes();
        let now = Instant::now();
        if now < self.next_housekeeping {
            return;
        }
        self.next_housekeeping = now + HOUSEKEEPING;
        self.housekeeping(now);
    }

    /// What the rebalance callback left: announce initial progress, forget revoked partitions.
    fn serve_notes(&mut self) {
        if self.shared.has_notes.swap(false, Ordering::AcqRel) {
            let notes = std::mem::take(
                &mut *self
                    .shared
                    .notes
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner),
            );
            for note in notes {
                match note {
                    Note::Assigned(partitions) => {
                        let records: Vec<handoff::Progress> = {
                            let core = self.shared.core();
                            partitions
                                .iter()
                                .filter_map(|&p| core.initial_progress(p))
                                .collect()
                        };
                        for r in records {
                            self.announce(&r);
                        }
                    }
                    Note::Revoked(partitions) => {
                        for p in partitions {
                            self.metrics.forget(p);
                        }
                    }
                    Note::Announce(r) => self.announce(&r),
                }
            }
        }
    }

    /// Every [`HOUSEKEEPING`]: lease expiry, flow control, gauges, periodic commits, garbage
    /// collection.
    fn housekeeping(&mut self, now: Instant) {
        let mono = handoff::mono_now();
        self.metrics.flush();
        let (pause, resume, held, positions, hold_times, anomalies, owns_zero) = {
            let mut core = self.shared.core();
            core.tick(mono, handoff::now_ms());
            let (pause, resume) = core.flow(mono);
            let stall_timeout = core.config().stall_timeout;
            for (partition, held) in core.take_stalled() {
                warn!(
                    topic = %self.topic,
                    partition,
                    held,
                    "partition paused with nothing released for {:?}: resuming past the hold \
                     limit (marker ends may lie behind the pause)",
                    stall_timeout
                );
            }
            let held: Vec<(u32, usize)> = core.held_counts().collect();
            let positions: Vec<(u32, Option<i64>)> = core.positions().collect();
            (
                pause,
                resume,
                held,
                positions,
                core.take_hold_times(),
                core.take_anomalies(),
                core.owns(0),
            )
        };
        self.metrics.anomalies(anomalies);
        self.flow(&pause, true);
        self.flow(&resume, false);
        for (p, n) in held {
            self.metrics.set_held(p, n);
        }
        {
            let ends = self
                .shared
                .ends
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            for (p, pos) in positions {
                if let (Some(&end), Some(pos)) = (ends.get(&p), pos) {
                    self.metrics.set_lag(p, end - pos);
                }
            }
        }
        for t in hold_times {
            self.metrics.observe_hold(t.as_secs_f64());
        }
        if let (Some(every), Some(at)) = (self.commit_interval, self.next_auto_commit)
            && now >= at
        {
            self.next_auto_commit = Some(now + every);
            self.commit_all(CommitMode::Async);
        }
        if owns_zero && now >= self.next_gc {
            self.next_gc = now + GC_EVERY;
            self.collect_garbage();
        }
    }

    pub(super) fn flow(&self, partitions: &[u32], pause: bool) {
        if partitions.is_empty() {
            return;
        }
        let mut tpl = TopicPartitionList::new();
        for &p in partitions {
            tpl.add_partition(&self.topic, p as i32);
        }
        let result = if pause {
            self.consumer.pause(&tpl)
        } else {
            self.consumer.resume(&tpl)
        };
        match result {
            Ok(()) => debug!(topic = %self.topic, ?partitions, pause, "flow control"),
            Err(e) => {
                warn!(topic = %self.topic, ?partitions, pause, error = %e, "pause/resume failed")
            }
        }
    }

    /// Tombstone leases expired long ago, closed ones only once their closing epoch is settled
    /// (`Core::collectable_leases`, with their producer's marker) and history older than every
    /// member keeps.
    pub(super) fn collect_garbage(&mut self) {
        let now_ms = handoff::now_ms();
        let (expired, floor) = {
            let core = self.shared.core();
            let expired: Vec<HandoffKey> = core
                .collectable_leases(now_ms)
                .flat_map(|l| {
                    let marker = HandoffKey::Marker {
                        topic: l.topic.clone(),
                        producer: l.producer.clone(),
                    };
                    [marker, HandoffKey::of_lease(l)]
                })
                .collect();
            (expired, core.history_gc_floor())
        };
        let old: Vec<u64> = self.history_keys.range(..floor).copied().collect();
        let keys = expired
            .into_iter()
            .chain(old.into_iter().map(|epoch| HandoffKey::Assignment {
                topic: self.topic.to_string(),
                epoch,
            }));
        for key in keys {
            debug!(key = %key.encode(), "handoff garbage collection");
            if let Err(e) = self.writer.send(&key, None) {
                warn!(key = %key.encode(), error = %e, "handoff garbage collection failed");
            }
        }
    }
}
impl Drop for Inner {
    fn drop(&mut self) {
        self.metrics.flush();
        if !self.closed {
            // Like a crash: rdkafka's drop still leaves the group, but the revocation callback
            // then commits nothing and runs no hook.
            self.shared.abandoned.store(true, Ordering::Release);
            // As in `close`: have librdkafka emit the final revocation before its close, so that
            // the close serves it while the group handle is alive (not after it terminated).
            self.consumer.unsubscribe();
        }
    }
}
