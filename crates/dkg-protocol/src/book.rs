//! The validated state of the control topic ([`AssignmentBook`]): the current assignment per
//! data topic, fed the control topic's records in log order. Rules: `docs/spec.md` section 6;
//! vectors: `spec/vectors/control.json` and `reject.json`.
//!
//! The control topic (one compacted partition, key = data topic, value = the assignment JSON,
//! tombstone = retract) is read by the Kafka glue's `ControlTopicReader`; every record goes through
//! [`AssignmentBook::apply`] before it can move a record.
//!
//! # Validation (`AssignmentBook`)
//!
//! Every value is checked before it can move a record. Rejected, with a `warn` log line, a
//! [`RejectReason`] and the last good assignment kept:
//!
//! - a missing or non-UTF-8 key (`bad_key`);
//! - a value over the size limit, checked before parsing (`oversize`);
//! - malformed JSON or a foreign document (`malformed_json`), an unknown format version
//!   (`unsupported_version`), a partition outside the document's own partition count
//!   (`out_of_range`), any other invariant [`Assignment::from_json`] checks (`invalid`);
//! - a key that differs from the document's `topic` (`topic_mismatch`): a record cannot retarget
//!   another topic's producers;
//! - an epoch below the current one (`stale_epoch`), or equal to it with different content
//!   (`epoch_conflict`). Epochs strictly increase per topic; the same epoch is one document, so a
//!   second, different document under it means two publishers disagree and neither is trusted over
//!   the one already in force. An identical re-publication is a harmless no-op
//!   ([`ControlUpdate::Unchanged`]).
//!
//! A tombstone clears the topic's epoch floor: after a retraction any epoch is accepted again. This
//! keeps long-running readers and freshly started ones (which may never see the retracted epochs
//! once compaction has removed them) in agreement.
//!
//! An assignment whose partition count differs from the topic's current one is *not* rejected here
//! (this module has no view of the data topic): the producer keeps it but routes by Kafka's default
//! placement until the counts match (the router in the Kafka glue). See `docs/architecture.md`.

use std::collections::HashMap;
use std::sync::Arc;

use dkg_core::{Assignment, Error, MAX_ASSIGNMENT_BYTES};

/// Why a control-topic record was rejected. `as_str` is the `reason` label of
/// `dkg_producer_assignments_rejected_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RejectReason {
    /// The record has no key, or a key that is not UTF-8 (not a topic name).
    BadKey,
    /// The value exceeds the size limit (checked before parsing).
    Oversize,
    /// Not JSON, wrong shape, or not a DKG assignment document.
    MalformedJson,
    /// A format version this build does not read.
    UnsupportedVersion,
    /// A partition number outside the document's partition count.
    OutOfRange,
    /// Any other violated invariant of the document.
    Invalid,
    /// The record key differs from the document's `topic`.
    TopicMismatch,
    /// The epoch is below the current assignment's.
    StaleEpoch,
    /// The epoch equals the current assignment's but the content differs.
    EpochConflict,
}

impl RejectReason {
    /// Every reason, in label order (metrics pre-create one series per reason).
    pub const ALL: [RejectReason; 9] = [
        RejectReason::BadKey,
        RejectReason::Oversize,
        RejectReason::MalformedJson,
        RejectReason::UnsupportedVersion,
        RejectReason::OutOfRange,
        RejectReason::Invalid,
        RejectReason::TopicMismatch,
        RejectReason::StaleEpoch,
        RejectReason::EpochConflict,
    ];

    /// The metric label value.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            RejectReason::BadKey => "bad_key",
            RejectReason::Oversize => "oversize",
            RejectReason::MalformedJson => "malformed_json",
            RejectReason::UnsupportedVersion => "unsupported_version",
            RejectReason::OutOfRange => "out_of_range",
            RejectReason::Invalid => "invalid",
            RejectReason::TopicMismatch => "topic_mismatch",
            RejectReason::StaleEpoch => "stale_epoch",
            RejectReason::EpochConflict => "epoch_conflict",
        }
    }

    /// Index into [`RejectReason::ALL`].
    #[must_use]
    pub const fn index(self) -> usize {
        self as usize
    }

    fn of_parse_error(e: &Error) -> Self {
        match e {
            Error::TooLarge { .. } => RejectReason::Oversize,
            Error::MalformedAssignment { .. } | Error::UnknownFormat { .. } => {
                RejectReason::MalformedJson
            }
            Error::UnsupportedVersion { .. } => RejectReason::UnsupportedVersion,
            Error::PartitionOutOfRange { .. } => RejectReason::OutOfRange,
            _ => RejectReason::Invalid,
        }
    }
}

impl std::fmt::Display for RejectReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What one control-topic record did to the [`AssignmentBook`].
#[derive(Clone, Debug)]
pub enum ControlUpdate {
    /// A new assignment is current for its topic.
    Adopted(Arc<Assignment>),
    /// A tombstone removed the topic's assignment.
    Retracted {
        /// The data topic.
        topic: String,
    },
    /// Nothing changed: an identical re-publication of the current assignment, or a tombstone for a
    /// topic without one.
    Unchanged {
        /// The data topic.
        topic: String,
    },
    /// The record was rejected; the topic's last good assignment stays.
    Rejected {
        /// The record key as text (lossy), if there was one.
        topic: Option<String>,
        /// Why.
        reason: RejectReason,
        /// The detailed error, for the log.
        detail: String,
    },
}

/// The validated state of the control topic: the current assignment per data topic.
///
/// Pure (no I/O): feed it records in log order with [`AssignmentBook::apply`].
#[derive(Debug, Clone)]
pub struct AssignmentBook {
    current: HashMap<String, Arc<Assignment>>,
    max_value_bytes: usize,
}

impl Default for AssignmentBook {
    fn default() -> Self {
        Self::new()
    }
}

impl AssignmentBook {
    /// An empty book accepting values up to [`MAX_ASSIGNMENT_BYTES`].
    #[must_use]
    pub fn new() -> Self {
        Self {
            current: HashMap::new(),
            max_value_bytes: MAX_ASSIGNMENT_BYTES,
        }
    }

    /// Lower the value size limit (it can never exceed [`MAX_ASSIGNMENT_BYTES`]).
    #[must_use]
    pub fn with_max_value_bytes(mut self, max: usize) -> Self {
        self.max_value_bytes = max.min(MAX_ASSIGNMENT_BYTES);
        self
    }

    /// The value size limit in force.
    #[must_use]
    pub fn max_value_bytes(&self) -> usize {
        self.max_value_bytes
    }

    /// The current assignment of `topic`.
    #[must_use]
    pub fn get(&self, topic: &str) -> Option<&Arc<Assignment>> {
        self.current.get(topic)
    }

    /// All current assignments (any order).
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Assignment>> {
        self.current.values()
    }

    /// Number of topics with a current assignment.
    #[must_use]
    pub fn len(&self) -> usize {
        self.current.len()
    }

    /// No topic has an assignment.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.current.is_empty()
    }

    /// Apply one control-topic record (key, value; `None` value = tombstone).
    pub fn apply(&mut self, key: Option<&[u8]>, value: Option<&[u8]>) -> ControlUpdate {
        let topic = match key.map(std::str::from_utf8) {
            Some(Ok(t)) if !t.is_empty() => t,
            Some(Ok(_)) | None => {
                return rejected(None, RejectReason::BadKey, "record has no key".into());
            }
            Some(Err(e)) => {
                return rejected(
                    key.map(|k| String::from_utf8_lossy(k).into_owned()),
                    RejectReason::BadKey,
                    format!("record key is not UTF-8: {e}"),
                );
            }
        };
        let Some(value) = value else {
            return match self.current.remove(topic) {
                Some(_) => ControlUpdate::Retracted {
                    topic: topic.to_owned(),
                },
                None => ControlUpdate::Unchanged {
                    topic: topic.to_owned(),
                },
            };
        };
        if value.len() > self.max_value_bytes {
            return rejected(
                Some(topic.to_owned()),
                RejectReason::Oversize,
                format!(
                    "value is {} bytes, limit {}",
                    value.len(),
                    self.max_value_bytes
                ),
            );
        }
        let assignment = match Assignment::from_json(value) {
            Ok(a) => a,
            Err(e) => {
                return rejected(
                    Some(topic.to_owned()),
                    RejectReason::of_parse_error(&e),
                    e.to_string(),
                );
            }
        };
        if assignment.topic() != topic {
            return rejected(
                Some(topic.to_owned()),
                RejectReason::TopicMismatch,
                format!(
                    "record key {topic:?} but the document is for topic {:?}",
                    assignment.topic()
                ),
            );
        }
        if let Some(current) = self.current.get(topic) {
            if assignment.epoch() < current.epoch() {
                return rejected(
                    Some(topic.to_owned()),
                    RejectReason::StaleEpoch,
                    format!(
                        "epoch {} is older than the current epoch {}",
                        assignment.epoch(),
                        current.epoch()
                    ),
                );
            }
            if assignment.epoch() == current.epoch() {
                if assignment == **current {
                    return ControlUpdate::Unchanged {
                        topic: topic.to_owned(),
                    };
                }
                return rejected(
                    Some(topic.to_owned()),
                    RejectReason::EpochConflict,
                    format!(
                        "a different document under the current epoch {}",
                        current.epoch()
                    ),
                );
            }
        }
        let assignment = Arc::new(assignment);
        self.current
            .insert(topic.to_owned(), Arc::clone(&assignment));
        ControlUpdate::Adopted(assignment)
    }
}

fn rejected(topic: Option<String>, reason: RejectReason, detail: String) -> ControlUpdate {
    ControlUpdate::Rejected {
        topic,
        reason,
        detail,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use dkg_core::fixtures;

    fn doc(topic: &str, epoch: u64, table: Vec<u32>) -> Assignment {
        fixtures::assignment(topic, 3, epoch, table, &[])
    }

    fn reason(u: &ControlUpdate) -> Option<RejectReason> {
        match u {
            ControlUpdate::Rejected { reason, .. } => Some(*reason),
            _ => None,
        }
    }

    #[test]
    fn reasons_are_indexed_in_order() {
        for (i, r) in RejectReason::ALL.iter().enumerate() {
            assert_eq!(r.index(), i);
        }
    }

    #[test]
    fn book_accepts_newer_and_rejects_hostile_values() {
        let mut book = AssignmentBook::new();
        let a5 = doc("t", 5, vec![0, 1, 2]);
        assert!(matches!(
            book.apply(Some(b"t"), Some(&a5.to_json())),
            ControlUpdate::Adopted(_)
        ));
        let oversize = vec![b' '; MAX_ASSIGNMENT_BYTES + 1];
        let mut wrong_version = a5.to_json_pretty();
        wrong_version = wrong_version.replacen("\"version\": 1", "\"version\": 3", 1);
        let out_of_range = String::from_utf8(a5.to_json()).unwrap().replacen(
            "\"table\":[0,1,2]",
            "\"table\":[0,1,7]",
            1,
        );
        type Case<'a> = (Option<&'a [u8]>, Vec<u8>, RejectReason);
        let cases: Vec<Case<'_>> = vec![
            (None, a5.to_json(), RejectReason::BadKey),
            (Some(&[0xff, 0xfe]), a5.to_json(), RejectReason::BadKey),
            (
                Some(b"t"),
                b"{not json".to_vec(),
                RejectReason::MalformedJson,
            ),
            (
                Some(b"t"),
                wrong_version.into_bytes(),
                RejectReason::UnsupportedVersion,
            ),
            (
                Some(b"t"),
                out_of_range.into_bytes(),
                RejectReason::OutOfRange,
            ),
            (Some(b"t"), oversize, RejectReason::Oversize),
            (
                Some(b"t"),
                doc("u", 9, vec![0]).to_json(),
                RejectReason::TopicMismatch,
            ),
            (
                Some(b"t"),
                doc("t", 4, vec![0]).to_json(),
                RejectReason::StaleEpoch,
            ),
            (
                Some(b"t"),
                doc("t", 5, vec![2, 1, 0]).to_json(),
                RejectReason::EpochConflict,
            ),
        ];
        for (key, value, want) in cases {
            let got = book.apply(key, Some(&value));
            assert_eq!(reason(&got), Some(want), "{got:?}");
            assert_eq!(book.get("t").unwrap().epoch(), 5, "last good stays");
        }
        // Identical re-publication: no-op.
        assert!(matches!(
            book.apply(Some(b"t"), Some(&a5.to_json())),
            ControlUpdate::Unchanged { .. }
        ));
        // Tombstone retracts and resets the epoch floor.
        assert!(matches!(
            book.apply(Some(b"t"), None),
            ControlUpdate::Retracted { .. }
        ));
        assert!(book.get("t").is_none());
        assert!(matches!(
            book.apply(Some(b"t"), None),
            ControlUpdate::Unchanged { .. }
        ));
        assert!(matches!(
            book.apply(Some(b"t"), Some(&doc("t", 1, vec![0]).to_json())),
            ControlUpdate::Adopted(_)
        ));
    }

    #[test]
    fn lower_size_limit_applies_before_parsing() {
        let mut book = AssignmentBook::new().with_max_value_bytes(10);
        let got = book.apply(Some(b"t"), Some(&doc("t", 1, vec![0]).to_json()));
        assert_eq!(reason(&got), Some(RejectReason::Oversize));
        assert_eq!(
            AssignmentBook::new()
                .with_max_value_bytes(usize::MAX)
                .max_value_bytes(),
            MAX_ASSIGNMENT_BYTES
        );
    }
}
