//! The core's side of split keys (`docs/spec.md` 4.6 and the consumer rules on split keys): the split
//! view rebuilt as the history changes, the whole <-> split transitions it reports, and the labels
//! of split records.

use super::*;

impl<M> Core<M> {
    /// Rebuild the split view after the history changed, and publish it to the lanes.
    pub(super) fn split_view_changed(&mut self) {
        if self.split_view.is_empty() && !self.history.has_splits() {
            return;
        }
        self.split_view = Arc::new(SplitView::new(&self.history));
        self.shared_view.set(Arc::clone(&self.split_view));
    }

    /// Keys whose split changed in epochs newer than the newest already reported, each against
    /// the epoch before it (the first epoch known: against nothing split).
    pub(super) fn split_transitions(&mut self) {
        let max = self.history.max_epoch();
        if max <= self.split_seen {
            return;
        }
        let from = self.split_seen;
        self.split_seen = max;
        let epochs: Vec<u64> = (from + 1..=max)
            .filter(|&e| self.history.get(e).is_some())
            .collect();
        for e in epochs {
            let prev = self.history.before(e).map(|a| a.epoch());
            let now_split = self.history.splits().get(&e);
            let before = prev.and_then(|p| self.history.splits().get(&p));
            let mut changes = Vec::new();
            for key in now_split.into_iter().flat_map(|m| m.keys()) {
                let parts = self.history.split_parts(key, e).unwrap_or_default();
                let was = prev.and_then(|p| self.history.split_parts(key, p));
                if !parts.is_empty() && was != Some(parts) {
                    changes.push(SplitChange {
                        key: key.clone(),
                        epoch: e,
                        parts: Box::from(parts),
                        partition: None,
                    });
                }
            }
            for key in before.into_iter().flat_map(|m| m.keys()) {
                let was_split = prev.is_some_and(|p| self.history.split_parts(key, p).is_some());
                if was_split && self.history.split_parts(key, e).is_none() {
                    changes.push(SplitChange {
                        key: key.clone(),
                        epoch: e,
                        parts: Box::default(),
                        partition: self.history.home(key, e),
                    });
                }
            }
            changes.sort_by(|a, b| a.key.cmp(&b.key));
            self.split_changes.extend(changes);
        }
    }

    /// Keys that became split (or split differently) or whole again since the last call, in
    /// epoch order, each once per transition (the consumer's hooks run them).
    pub fn take_split_changes(&mut self) -> Vec<SplitChange> {
        std::mem::take(&mut self.split_changes)
    }

    /// The label of a record about to go to [`Core::on_record`] (see [`Core::split_label`]),
    /// after the bookkeeping that `on_record` does first for any fetched record (the first
    /// record of a partition can raise its drained epoch), so that both see the same state.
    #[inline]
    pub fn label_record(
        &mut self,
        partition: u32,
        offset: i64,
        key: Option<&[u8]>,
        epoch: Option<u64>,
    ) -> Option<u32> {
        if self.split_view.is_empty() {
            return None;
        }
        self.fetched(partition, offset)?;
        self.split_label(partition, key, epoch)
    }

    /// Over how many partitions `key` is split in the epoch of its record on `partition` with
    /// `epoch` (its `dkg-epoch` header), `None` if whole: the label the application sees, the
    /// record's at arrival (the glue asks through [`Core::label_record`]).
    #[inline]
    pub fn split_label(
        &self,
        partition: u32,
        key: Option<&[u8]>,
        epoch: Option<u64>,
    ) -> Option<u32> {
        if self.split_view.is_empty() {
            return None;
        }
        let drained = self.parts.get(&partition)?.drained;
        self.split_view.label(key?, partition, drained, epoch)
    }
}
