//! Commits of a [`DkgConsumer`]: drained changes (hooks, synchronous commit with the passed map as
//! metadata, then the announcement on the handoff topic), periodic and explicit commits.

use super::*;

impl Inner {
    pub(super) fn announce(&self, progress: &handoff::Progress) {
        if let Err(e) = self.writer.send_progress(progress) {
            warn!(topic = %self.topic, partition = progress.partition, error = %e,
                "progress announcement not sent");
        }
    }

    /// Commit the drained changes: hooks, synchronous commit with metadata, then announce.
    pub(super) async fn commit_progress(&mut self) {
        let now = Instant::now();
        let mono = handoff::mono_now();
        let (snapshots, drained, owned, partitions, immediate) = {
            let mut core = self.shared.core();
            let mut snapshots = Vec::new();
            let mut drained = Vec::new();
            let mut immediate = Vec::new();
            for p in core.progress_due() {
                drained.extend(core.take_drained_epochs(p));
                match core.snapshot(p) {
                    Some(Ok(s)) => {
                        self.shared
                            .warn_window_left_out(&s, core.config().max_metadata_bytes);
                        snapshots.push(s);
                    }
                    Some(Err(size)) => {
                        error!(topic = %self.topic, partition = p, size,
                            "commit metadata over the limit: progress of this partition cannot be \
                             committed (too many producers?); moved keys waiting for it stay held");
                        self.progress_retry_at = Some(now + Duration::from_secs(5));
                    }
                    // Nothing fetched yet: the change comes from leases only and claims no
                    // processing, so it is as durable as the committed state it starts from.
                    None => {
                        if let Some(r) = core.mark_durable(p, mono) {
                            immediate.push(r);
                        }
                    }
                }
            }
            (
                snapshots,
                drained,
                core.owned(),
                core.partitions(),
                immediate,
            )
        };
        for r in &immediate {
            self.announce(r);
        }
        for d in &drained {
            let change = EpochChange {
                prev: d.prev.as_deref(),
                next: &d.next,
                partition: d.partition,
                owned: &owned,
                partitions,
            };
            self.shared.hooks.on_epoch(&change);
        }
        if snapshots.is_empty() {
            return;
        }
        let mut tpl = TopicPartitionList::new();
        for s in &snapshots {
            let mut e = tpl.add_partition(&self.topic, s.partition as i32);
            if e.set_offset(Offset::Offset(s.offset)).is_err() {
                continue;
            }
            e.set_metadata(&s.metadata);
        }
        let consumer = Arc::clone(&self.consumer);
        let result = tokio::task::spawn_blocking(move || consumer.commit(&tpl, CommitMode::Sync))
            .await
            .map_err(|e| e.to_string())
            .and_then(|r| r.map_err(|e| e.to_string()));
        match result {
            Ok(()) => {
                self.progress_retry_at = None;
                let mut records = Vec::with_capacity(snapshots.len());
                {
                    let mut core = self.shared.core();
                    for s in &snapshots {
                        if core.owns(s.partition) {
                            core.committed(s.partition, s.drained, mono);
                            records.push(core.progress_record(s));
                        }
                    }
                }
                for r in &records {
                    debug!(topic = %self.topic, partition = r.partition, drained = r.drained,
                        offset = r.committed_offset, "progress committed");
                    self.announce(r);
                }
            }
            Err(e) => {
                warn!(topic = %self.topic, error = %e, "progress commit failed (retrying)");
                self.progress_retry_at = Some(Instant::now() + Duration::from_millis(200));
            }
        }
    }

    /// Commit every owned partition's offset and metadata.
    pub(super) fn commit_all(&self, mode: CommitMode) -> Option<TopicPartitionList> {
        let mut core = self.shared.core();
        let mut tpl = TopicPartitionList::new();
        for p in core.owned() {
            if let Some(Ok(s)) = core.snapshot(p) {
                self.shared
                    .warn_window_left_out(&s, core.config().max_metadata_bytes);
                let mut e = tpl.add_partition(&self.topic, p as i32);
                if e.set_offset(Offset::Offset(s.offset)).is_ok() {
                    e.set_metadata(&s.metadata);
                }
            }
        }
        drop(core);
        if tpl.count() == 0 {
            return None;
        }
        if let CommitMode::Async = mode {
            if let Err(e) = self.consumer.commit(&tpl, CommitMode::Async) {
                warn!(topic = %self.topic, error = %e, "periodic commit failed");
            }
            return None;
        }
        Some(tpl)
    }

    /// Mark the last record processed and commit every owned partition synchronously.
    pub(super) async fn commit(&mut self) -> Result<()> {
        self.processed();
        self.commit_progress().await;
        if let Some(tpl) = self.commit_all(CommitMode::Sync) {
            let consumer = Arc::clone(&self.consumer);
            tokio::task::spawn_blocking(move || consumer.commit(&tpl, CommitMode::Sync))
                .await
                .map_err(|e| Error::Timeout {
                    what: format!("commit task failed: {e}"),
                    millis: 0,
                })??;
        }
        Ok(())
    }
}
