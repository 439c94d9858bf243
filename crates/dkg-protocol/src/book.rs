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
//!   (`unsupported_version`), a partition outside the document's own partition count or an
//!   epoch above 2^53 - 1 (`out_of_range`), any other invariant [`Assignment::from_json`] checks (`invalid`);
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
//! Format version 2 (`docs/spec.md` 6.4): a retraction *document* keeps its epoch as the topic's
//! floor; the `@generation` record names the control topic's incarnation, and a document of
//! another generation drops the whole state ([`ControlUpdate::Reset`], once with a request to
//! re-read the topic from the beginning, then `generation_mismatch`).
//!
//! An assignment whose partition count differs from the topic's current one is *not* rejected here
//! (this module has no view of the data topic): the producer keeps it but routes by Kafka's default
//! placement until the counts match (the router in the Kafka glue). See `docs/architecture.md`.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use dkg_kafka_core::assignment::{ControlDocument, GENERATION_KEY, Retraction};
use dkg_kafka_core::{Assignment, Error, MAX_ASSIGNMENT_BYTES};

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
    /// The document names another control-topic generation than the one in force, also after
    /// a re-read from the beginning (`docs/spec.md` 6.4).
    GenerationMismatch,
}

impl RejectReason {
    /// Every reason, in label order (metrics pre-create one series per reason).
    pub const ALL: [RejectReason; 10] = [
        RejectReason::BadKey,
        RejectReason::Oversize,
        RejectReason::MalformedJson,
        RejectReason::UnsupportedVersion,
        RejectReason::OutOfRange,
        RejectReason::Invalid,
        RejectReason::TopicMismatch,
        RejectReason::StaleEpoch,
        RejectReason::EpochConflict,
        RejectReason::GenerationMismatch,
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
            RejectReason::GenerationMismatch => "generation_mismatch",
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
            Error::PartitionOutOfRange { .. } | Error::EpochOutOfRange { .. } => {
                RejectReason::OutOfRange
            }
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
    /// The book dropped every topic's state (`docs/spec.md` 6.4): a generation record with a new
    /// id (the control topic was recreated; the reader is at its beginning), or, with `reread`,
    /// a document of an unknown generation: the reader MUST then seek to the beginning of the
    /// control topic and apply every record again. Every topic is without assignment until then.
    Reset {
        /// The generation in force afterwards (`None` until a generation record is read).
        generation: Option<String>,
        /// The driver must re-read the control topic from the beginning.
        reread: bool,
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
    /// Topics retracted by a retraction document: its epoch stays their floor (6.4).
    retracted: HashMap<String, Retraction>,
    /// The generation in force: the last generation record's id.
    generation: Option<String>,
    /// Generations that made the book ask for a re-read: one re-read each, so a stray document
    /// cannot make the reader loop.
    rereads: HashSet<String>,
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
            retracted: HashMap::new(),
            generation: None,
            rereads: HashSet::new(),
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

    /// The epoch floor a retraction document left on `topic` (no assignment in force then).
    #[must_use]
    pub fn retraction(&self, topic: &str) -> Option<&Retraction> {
        self.retracted.get(topic)
    }

    /// The control-topic generation in force (the last generation record read).
    #[must_use]
    pub fn generation(&self) -> Option<&str> {
        self.generation.as_deref()
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
            // A tombstone retracts and clears the floor, also a retraction document's (6.3).
            let floor = self.retracted.remove(topic);
            return match (self.current.remove(topic), floor) {
                (Some(_), _) => ControlUpdate::Retracted {
                    topic: topic.to_owned(),
                },
                (None, _) => ControlUpdate::Unchanged {
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
        let document = match ControlDocument::from_json(value) {
            Ok(d) => d,
            Err(e) => {
                return rejected(
                    Some(topic.to_owned()),
                    RejectReason::of_parse_error(&e),
                    e.to_string(),
                );
            }
        };
        let (doc_topic, generation) = match &document {
            ControlDocument::Generation(g) => return self.apply_generation(topic, g),
            ControlDocument::Assignment(a) => (a.topic(), a.generation()),
            ControlDocument::Retraction(r) => (r.topic.as_str(), r.generation.as_deref()),
        };
        if doc_topic != topic {
            return rejected(
                Some(topic.to_owned()),
                RejectReason::TopicMismatch,
                format!("record key {topic:?} but the document is for topic {doc_topic:?}"),
            );
        }
        if let Some(g) = generation
            && self.generation.as_deref() != Some(g)
        {
            return self.generation_differs(topic, g);
        }
        let epoch = match &document {
            ControlDocument::Assignment(a) => a.epoch(),
            ControlDocument::Retraction(r) => r.epoch,
            ControlDocument::Generation(_) => 0,
        };
        // The epoch in force: the current assignment's, or the floor a retraction left; the
        // same epoch is one document, compared by its decoded members.
        let same = match (
            &document,
            self.current.get(topic),
            self.retracted.get(topic),
        ) {
            (_, Some(current), _) if epoch < current.epoch() => {
                return stale(topic, epoch, current.epoch());
            }
            (_, _, Some(floor)) if epoch < floor.epoch => return stale(topic, epoch, floor.epoch),
            (ControlDocument::Assignment(a), Some(current), _) if epoch == current.epoch() => {
                Some(**a == **current)
            }
            (ControlDocument::Retraction(r), _, Some(floor)) if epoch == floor.epoch => {
                Some(r == floor)
            }
            (_, Some(current), _) if epoch == current.epoch() => Some(false),
            (_, _, Some(floor)) if epoch == floor.epoch => Some(false),
            _ => None,
        };
        match same {
            Some(true) => {
                return ControlUpdate::Unchanged {
                    topic: topic.to_owned(),
                };
            }
            Some(false) => {
                return rejected(
                    Some(topic.to_owned()),
                    RejectReason::EpochConflict,
                    format!("a different document under the current epoch {epoch}"),
                );
            }
            None => {}
        }
        match document {
            ControlDocument::Assignment(a) => {
                self.retracted.remove(topic);
                let a = Arc::new(*a);
                self.current.insert(topic.to_owned(), Arc::clone(&a));
                ControlUpdate::Adopted(a)
            }
            ControlDocument::Retraction(r) => {
                self.retracted.insert(topic.to_owned(), r);
                match self.current.remove(topic) {
                    Some(_) => ControlUpdate::Retracted {
                        topic: topic.to_owned(),
                    },
                    None => ControlUpdate::Unchanged {
                        topic: topic.to_owned(),
                    },
                }
            }
            ControlDocument::Generation(_) => ControlUpdate::Unchanged {
                topic: topic.to_owned(),
            },
        }
    }

    /// A generation record (6.4): under [`GENERATION_KEY`] only; the first one read is adopted
    /// as it is (a topic of the first version may get one later), a new id drops every topic's
    /// state (the control topic was recreated and the reader is at its beginning).
    fn apply_generation(&mut self, key: &str, generation: &str) -> ControlUpdate {
        if key != GENERATION_KEY {
            return rejected(
                Some(key.to_owned()),
                RejectReason::Invalid,
                format!("a generation record keyed {key:?}, not {GENERATION_KEY:?}"),
            );
        }
        match self.generation.as_deref() {
            Some(g) if g == generation => ControlUpdate::Unchanged {
                topic: key.to_owned(),
            },
            None => {
                self.generation = Some(generation.to_owned());
                ControlUpdate::Unchanged {
                    topic: key.to_owned(),
                }
            }
            Some(_) => {
                self.drop_state();
                self.generation = Some(generation.to_owned());
                ControlUpdate::Reset {
                    generation: self.generation.clone(),
                    reread: false,
                }
            }
        }
    }

    /// A document of `topic` names generation `generation`, not the one in force: the first
    /// time for that generation the book drops its state and asks for a re-read (the reader
    /// may have resumed in the middle of a recreated topic); after that, rejected.
    fn generation_differs(&mut self, topic: &str, generation: &str) -> ControlUpdate {
        if self.rereads.insert(generation.to_owned()) {
            self.drop_state();
            self.generation = None;
            return ControlUpdate::Reset {
                generation: None,
                reread: true,
            };
        }
        rejected(
            Some(topic.to_owned()),
            RejectReason::GenerationMismatch,
            format!(
                "generation {generation} but {} is in force",
                self.generation.as_deref().unwrap_or("none")
            ),
        )
    }

    fn drop_state(&mut self) {
        self.current.clear();
        self.retracted.clear();
    }
}

fn stale(topic: &str, epoch: u64, floor: u64) -> ControlUpdate {
    rejected(
        Some(topic.to_owned()),
        RejectReason::StaleEpoch,
        format!("epoch {epoch} is older than the current epoch {floor}"),
    )
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
    use dkg_kafka_core::fixtures;

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
    fn retraction_documents_keep_the_floor_and_generations_reset() {
        let g1 = "0123456789abcdef0123456789abcdef";
        let g2 = "00000000000000000000000000000002";
        let retract = |epoch| {
            Retraction {
                topic: "t".to_owned(),
                epoch,
                generation: None,
                created_at_ms: 1,
            }
            .to_json()
        };
        let with = |epoch, g: &str| {
            doc("t", epoch, vec![0])
                .with_generation(g)
                .unwrap()
                .to_json()
        };
        let generation = |g| dkg_kafka_core::assignment::generation_record(g).unwrap();
        let mut book = AssignmentBook::new();
        let key = Some(&b"t"[..]);
        let gkey = Some(GENERATION_KEY.as_bytes());
        book.apply(key, Some(&doc("t", 5, vec![0]).to_json()));
        assert!(matches!(
            book.apply(key, Some(&retract(7))),
            ControlUpdate::Retracted { .. }
        ));
        assert_eq!(
            (
                book.get("t").map(|a| a.epoch()),
                book.retraction("t").map(|r| r.epoch)
            ),
            (None, Some(7))
        );
        let stale = book.apply(key, Some(&doc("t", 6, vec![0]).to_json()));
        assert_eq!(reason(&stale), Some(RejectReason::StaleEpoch));
        assert!(matches!(
            book.apply(key, Some(&retract(7))),
            ControlUpdate::Unchanged { .. }
        ));
        // The first generation record is adopted without dropping anything.
        assert!(matches!(
            book.apply(gkey, Some(&generation(g1))),
            ControlUpdate::Unchanged { .. }
        ));
        assert_eq!(book.retraction("t").map(|r| r.epoch), Some(7));
        assert!(matches!(
            book.apply(key, Some(&with(8, g1))),
            ControlUpdate::Adopted(_)
        ));
        assert!(book.retraction("t").is_none());
        // A document of another generation: dropped, re-read asked for once, then rejected.
        assert!(matches!(
            book.apply(key, Some(&with(9, g2))),
            ControlUpdate::Reset {
                generation: None,
                reread: true
            }
        ));
        assert!(book.is_empty() && book.generation().is_none());
        book.apply(gkey, Some(&generation(g1)));
        let again = book.apply(key, Some(&with(9, g2)));
        assert_eq!(reason(&again), Some(RejectReason::GenerationMismatch));
        // A generation record with a new id drops the state, and lower epochs are accepted.
        book.apply(key, Some(&with(8, g1)));
        assert!(matches!(
            book.apply(gkey, Some(&generation(g2))),
            ControlUpdate::Reset { reread: false, .. }
        ));
        assert!(book.is_empty());
        assert_eq!(book.generation(), Some(g2));
        assert!(matches!(
            book.apply(key, Some(&with(1, g2))),
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
