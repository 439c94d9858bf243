//! What the core commits and announces: the snapshot of a partition's position and drained epoch,
//! the progress records (`docs/spec.md` 9.1) due, made durable or first announced, and the drained
//! epochs the driver's hooks see.

use super::*;

impl<M> Core<M> {
    pub(super) fn lowest_unprocessed(&self, partition: u32) -> Option<i64> {
        let part = self.parts.get(&partition)?;
        let mut low = part.lane.position()?;
        if let Some(o) = part.hold.lowest_unprocessed() {
            low = low.min(o);
        }
        if let Some(app) = self.in_app.filter(|a| a.partition == partition) {
            low = low.min(app.offset);
        }
        Some(low)
    }

    /// What to commit for `partition` now. `None` before its first record; `Err(size)` when the
    /// metadata does not fit (then nothing may be committed: an offset without the passed map
    /// would let a next owner re-process records others rely on being done). A snapshot whose
    /// metadata leaves out its skip window is counted in [`Anomalies::windows_left_out`] (once
    /// per call: build one per commit) and says so in [`Snapshot::window_left_out`].
    pub fn snapshot(&mut self, partition: u32) -> Option<Result<Snapshot, usize>> {
        let part = self.parts.get(&partition)?;
        let offset = self.lowest_unprocessed(partition)?;
        let mut next = part.lane.position()?;
        let mut unprocessed = part.hold.unprocessed_offsets();
        if let Some(app) = self.in_app.filter(|a| a.partition == partition)
            && let Err(i) = unprocessed.binary_search(&app.offset)
        {
            unprocessed.insert(i, app.offset);
        }
        // Not fetched past the previous owner's window yet: what it left unprocessed there still
        // is, the rest was processed.
        if let Some((end, left)) = part.progress.inherited_window()
            && end > next
        {
            unprocessed.extend(left.range(next..end).copied());
            next = end;
        }
        let snapshot = part
            .progress
            .meta(
                part.drained,
                offset,
                next,
                &unprocessed,
                self.leases.values(),
                self.now_ms,
                self.cfg.max_metadata_bytes,
            )
            .map(|(metadata, left_out)| Snapshot {
                partition,
                offset,
                metadata,
                drained: part.drained,
                passed: part.progress.passed_epochs(),
                window_left_out: left_out.then_some(unprocessed.len()),
            });
        if let Ok(Snapshot {
            window_left_out: Some(_),
            ..
        }) = snapshot
        {
            self.anomalies.windows_left_out += 1;
        }
        Some(snapshot)
    }

    /// Partitions whose drained value changed since their last progress commit.
    pub fn progress_due(&self) -> Vec<u32> {
        self.parts
            .iter()
            .filter(|(_, p)| p.drained != p.durable)
            .map(|(&p, _)| p)
            .collect()
    }

    /// Whether some partition's drained value changed since its last progress commit. Cheap
    /// when nothing but fast-path records happened since the last call.
    #[inline]
    pub fn has_progress_due(&mut self) -> bool {
        if !self.dirty {
            return false;
        }
        let due = self.parts.values().any(|p| p.drained != p.durable);
        if !due {
            self.dirty = false;
        }
        due
    }

    /// A partition with nothing fetched whose drained value changed (through leases only): no
    /// processing is claimed, so it is as durable as the committed state it started from.
    /// Returns the progress to announce.
    pub fn mark_durable(&mut self, partition: u32, now: Monotonic) -> Option<Progress> {
        let part = self.parts.get_mut(&partition)?;
        let drained = part.drained;
        self.committed(partition, drained, now);
        self.initial_progress(partition)
    }

    /// The progress of an owned partition as committed (announced on assignment).
    pub fn initial_progress(&self, partition: u32) -> Option<Progress> {
        let part = self.parts.get(&partition)?;
        Some(Progress {
            group: self.group.to_string(),
            topic: self.topic.to_string(),
            partition,
            drained: part.durable,
            passed: part.progress.passed_epochs(),
            committed_offset: -1,
            updated_at_ms: self.now_ms,
        })
    }

    /// The epochs `partition` drained since the hooks last ran for it (oldest first, at most
    /// the history kept), marking them hooked.
    pub fn take_drained_epochs(&mut self, partition: u32) -> Vec<Drained> {
        let Some(part) = self.parts.get_mut(&partition) else {
            return Vec::new();
        };
        if part.drained <= part.hooked {
            return Vec::new();
        }
        let from = part.hooked.max(self.history.min_epoch().saturating_sub(1));
        let to = part.drained;
        part.hooked = to;
        ((from + 1)..=to)
            .filter_map(|e| {
                self.history.get(e).map(|next| Drained {
                    partition,
                    prev: self.history.before(e).cloned(),
                    next: Arc::clone(next),
                })
            })
            .collect()
    }

    /// A progress commit of `partition` succeeded: its drained value is durable.
    pub fn committed(&mut self, partition: u32, drained: u64, now: Monotonic) {
        if let Some(part) = self.parts.get_mut(&partition) {
            part.durable = drained;
            part.high = part.high.max(drained);
            self.dirty = true;
            if part.hooked < drained {
                part.hooked = drained;
            }
            self.settled = self.compute_settled();
            self.release(now);
        }
    }

    /// The progress to announce for `snapshot`.
    pub fn progress_record(&self, s: &Snapshot) -> Progress {
        Progress {
            group: self.group.to_string(),
            topic: self.topic.to_string(),
            partition: s.partition,
            drained: s.drained,
            passed: s.passed.clone(),
            committed_offset: s.offset,
            updated_at_ms: self.now_ms,
        }
    }
}
