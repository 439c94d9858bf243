//! The handoff topic: how producers and consumer groups tell each other where an epoch switch
//! stands. Wire format: `docs/spec.md` section 9.
//!
//! One compacted topic (default [`DEFAULT_HANDOFF_TOPIC`], exactly 1 partition,
//! `cleanup.policy=compact`, created and checked like the control topic by
//! `ensure_handoff_topic` in the Kafka glue). A single partition gives one total order over every record; compaction
//! keeps the latest value per key, so a reader that starts at the beginning and reads to the end knows
//! the current state. Keys ([`HandoffKey`]) and values (JSON, typed below):
//!
//! | key | value | written by |
//! |---|---|---|
//! | `lease2/<topic>/<producer>` | [`Lease`]: the producer writes to `<topic>` and must be waited for | each ordering producer: at start, every lease/3, on close |
//! | `marker/<topic>/<producer>` | [`Marker`]: where the producer's records of epochs below `epoch` end, per partition | each ordering producer, once all those records are acknowledged |
//! | `assignment/<topic>/<epoch>` | the [`Assignment`] JSON | each ordering producer before its marker of `<epoch>` (same bytes: compaction dedups) |
//! | `progress/<group>/<topic>/<partition>` | [`Progress`]: how far the group has drained that partition | the `DkgConsumer` owning the partition, after committing |
//!
//! Tombstones: a lease is tombstoned once it has been expired for a while (garbage collection by
//! the consumers, see [`crate::consumer`]), closed or not; old history epochs likewise. Until then
//! a closed lease stays awaited up to its `closed_at_epoch` ([`Lease::awaited_for`]).
//!
//! Groups may contain `/`; topics may not. Keys are therefore parsed from the right
//! (`progress/<group with slashes>/<topic>/<partition>`).
//!
//! Clocks: a lease carries an absolute expiry (`expires_at_ms`, the producer's wall clock) that
//! consumers compare with theirs. Hosts are assumed to agree on the time to well within a lease
//! duration (NTP); skew shortens or lengthens how long a dead producer is waited for, nothing else.
//! Consumers bound the lengthening: a lease read at their time `t` counts as expired at
//! `t + max_lease` at the latest (`CoreConfig::max_lease` in [`crate::consumer::core`]).

use std::collections::BTreeMap;
use std::fmt;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use dkg_kafka_core::Assignment;
use serde::{Deserialize, Serialize};

/// Default name of the handoff topic.
pub const DEFAULT_HANDOFF_TOPIC: &str = "_dkg.handoff";

/// Default lease duration of an ordering producer: 30 s.
///
/// Why not shorter: renewals stall while the handoff partition has no leader, and a lease that
/// expires during a failover lets consumers stop waiting for a live producer's markers (its moved
/// keys can then be reordered). A failover takes Kafka's `broker.session.timeout.ms` (9 s) to
/// fence a dead broker, then an election and the producer's metadata refresh, and the last renewal
/// may be a third of a lease old when the leader dies: a 10 s lease expired in a broker-kill test
/// on the 3-broker cluster. The price of a longer lease: a producer that dies without closing is
/// waited for this long.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// A producer instance's identity: 128 random bits as 32 lowercase hex digits, fresh per
/// `DkgProducer` instance (a restarted producer is a new producer).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ProducerId(Arc<str>);

impl ProducerId {
    /// A fresh random id; `nanos` is the caller's wall clock in nanoseconds (this crate reads no
    /// clock).
    ///
    /// Random enough for uniqueness (never for secrecy): two SipHash outputs under the process's
    /// randomly keyed `RandomState`, over the time, the process id and a process-wide counter.
    #[must_use]
    pub fn random(nanos: u128) -> Self {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let seq = SEQ.fetch_add(1, Ordering::Relaxed);
        let half = |salt: u64| {
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u64(salt);
            h.write_u128(nanos);
            h.write_u32(std::process::id());
            h.write_u64(seq);
            h.finish()
        };
        Self(Arc::from(format!("{:016x}{:016x}", half(1), half(2))))
    }

    /// Parse an id (32 lowercase hex digits).
    #[must_use]
    pub fn parse(s: &str) -> Option<Self> {
        (s.len() == 32 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
            .then(|| Self(Arc::from(s)))
    }

    /// The id as text.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ProducerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for ProducerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ProducerId({})", self.0)
    }
}

impl TryFrom<String> for ProducerId {
    type Error = String;
    fn try_from(s: String) -> std::result::Result<Self, String> {
        Self::parse(&s).ok_or_else(|| format!("not a producer id (32 lowercase hex digits): {s:?}"))
    }
}

impl From<ProducerId> for String {
    fn from(id: ProducerId) -> String {
        id.0.to_string()
    }
}

/// `lease2/<topic>/<producer>`: an ordering producer writes to `topic`; consumers wait for its
/// markers while the lease is live, and up to its `closed_at_epoch` once closed (spec 9.1). On the wire the value also carries
/// `"mode":"marker"`, a fixed member every producer writes and readers ignore.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct Lease {
    /// The producer instance.
    pub producer: ProducerId,
    /// The data topic.
    pub topic: String,
    /// The producer never routed a record of `topic` under an epoch below this one, so consumers
    /// need not wait for its markers of epochs `<= first_epoch`.
    pub first_epoch: u64,
    /// Lease duration (renewed every third of it).
    pub lease_ms: u64,
    /// Wall-clock expiry (the producer's clock). Not renewed by then: the producer counts as dead.
    pub expires_at_ms: u64,
    /// Set on a clean close: the producer wrote its markers up to this epoch and will write
    /// nothing more; consumers wait for it only for epochs `<=` this one (until expiry).
    #[serde(default)]
    pub closed_at_epoch: Option<u64>,
}

impl Serialize for Lease {
    /// The members in the order the Java producer writes them, `closed_at_epoch` only when set,
    /// then the fixed `"mode":"marker"`.
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut out = s.serialize_struct("Lease", 7)?;
        out.serialize_field("producer", &self.producer)?;
        out.serialize_field("topic", &self.topic)?;
        out.serialize_field("first_epoch", &self.first_epoch)?;
        out.serialize_field("lease_ms", &self.lease_ms)?;
        out.serialize_field("expires_at_ms", &self.expires_at_ms)?;
        match self.closed_at_epoch {
            Some(c) => out.serialize_field("closed_at_epoch", &c)?,
            None => out.skip_field("closed_at_epoch")?,
        }
        out.serialize_field("mode", "marker")?;
        out.end()
    }
}

/// Largest marker value read (checked before parsing): about 20 bytes per partition for the
/// largest partition count an assignment may name.
pub const MAX_MARKER_BYTES: usize = 24 * MAX_MARKER_PARTITIONS;

/// Most partitions a marker may name (the assignment document's limit, spec 4.5).
pub const MAX_MARKER_PARTITIONS: usize = 1_000_000;

/// `marker/<topic>/<producer>`: every record `producer` routed under an epoch below `epoch` to
/// partition `p` of `topic` has an offset below `ends[p]` (spec 9.2).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Marker {
    /// The producer instance.
    pub producer: ProducerId,
    /// The data topic.
    pub topic: String,
    /// The epoch whose predecessors end at `ends`.
    pub epoch: u64,
    /// Per partition (index = partition): 1 + the largest offset of a record routed under an
    /// epoch below `epoch` (0: none), or the previous marker's end if none since.
    pub ends: Vec<i64>,
}

/// Why a marker record was rejected (the consumer counts each, `docs/spec.md` 9.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MarkerReject {
    /// The value exceeds [`MAX_MARKER_BYTES`] or names more than [`MAX_MARKER_PARTITIONS`]
    /// partitions.
    Oversize,
    /// Not JSON, or not a marker (a member missing, repeated or of the wrong type).
    MalformedJson,
    /// The value's `topic` or `producer` differs from its key's.
    KeyMismatch,
    /// Epoch 0, no partition, or a negative end.
    Invalid,
    /// `ends` does not have one entry per partition of the topic (checked by the consumer, which
    /// knows the count).
    PartitionCount,
}

impl MarkerReject {
    /// Every reason, in label order (metrics pre-create one series per reason).
    pub const ALL: [MarkerReject; 5] = [
        MarkerReject::Oversize,
        MarkerReject::MalformedJson,
        MarkerReject::KeyMismatch,
        MarkerReject::Invalid,
        MarkerReject::PartitionCount,
    ];

    /// The metrics label.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            MarkerReject::Oversize => "oversize",
            MarkerReject::MalformedJson => "malformed_json",
            MarkerReject::KeyMismatch => "key_mismatch",
            MarkerReject::Invalid => "invalid",
            MarkerReject::PartitionCount => "partition_count",
        }
    }

    /// Index into [`MarkerReject::ALL`].
    #[must_use]
    pub fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for MarkerReject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Decode the value of `marker/<topic>/<producer>` (strict: see [`MarkerReject`]).
pub fn decode_marker(
    topic: &str,
    producer: &ProducerId,
    value: &[u8],
) -> std::result::Result<Marker, MarkerReject> {
    if value.len() > MAX_MARKER_BYTES {
        return Err(MarkerReject::Oversize);
    }
    let m: Marker = serde_json::from_slice(value).map_err(|_| MarkerReject::MalformedJson)?;
    if m.topic != topic || &m.producer != producer {
        return Err(MarkerReject::KeyMismatch);
    }
    if m.ends.len() > MAX_MARKER_PARTITIONS {
        return Err(MarkerReject::Oversize);
    }
    if m.epoch == 0 || m.ends.is_empty() || m.ends.iter().any(|&o| o < 0) {
        return Err(MarkerReject::Invalid);
    }
    Ok(m)
}

impl Lease {
    /// Not expired at `now_ms`.
    #[must_use]
    pub fn is_live(&self, now_ms: u64) -> bool {
        now_ms < self.expires_at_ms
    }

    /// Whether consumers may still have to wait for one of this producer's markers: the lease is
    /// live, or closed (a clean close wrote its markers first, so waiting for them is bounded;
    /// a closed lease stops counting only when it is tombstoned).
    #[must_use]
    pub fn is_awaitable(&self, now_ms: u64) -> bool {
        self.closed_at_epoch.is_some() || self.is_live(now_ms)
    }

    /// Whether consumers must wait for this producer's marker of `epoch` before treating records
    /// of earlier epochs as drained: possibly routed under an earlier epoch, and either closed at
    /// `epoch` or later (whatever `expires_at_ms` says) or running with a live lease.
    #[must_use]
    pub fn awaited_for(&self, epoch: u64, now_ms: u64) -> bool {
        self.first_epoch < epoch
            && match self.closed_at_epoch {
                Some(c) => epoch <= c,
                None => self.is_live(now_ms),
            }
    }
}

/// `progress/<group>/<topic>/<partition>`: how far `group` has drained `partition`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress {
    /// The consumer group.
    pub group: String,
    /// The data topic.
    pub topic: String,
    /// The partition.
    pub partition: u32,
    /// Every record of the partition with an epoch below `drained` that any awaited producer
    /// wrote has been processed (and committed). Records of keys that moved away from this
    /// partition at an epoch `<= drained` may be processed elsewhere.
    pub drained: u64,
    /// Per producer: the highest epoch whose marker the group has passed on this partition.
    #[serde(default)]
    pub passed: BTreeMap<ProducerId, u64>,
    /// The committed offset that made this durable.
    pub committed_offset: i64,
    /// When this was written (the writer's clock).
    pub updated_at_ms: u64,
}

/// A key of the handoff topic.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum HandoffKey {
    /// `lease2/<topic>/<producer>`.
    Lease {
        /// Data topic.
        topic: String,
        /// Producer.
        producer: ProducerId,
    },
    /// `marker/<topic>/<producer>`.
    Marker {
        /// Data topic.
        topic: String,
        /// Producer.
        producer: ProducerId,
    },
    /// `assignment/<topic>/<epoch>`.
    Assignment {
        /// Data topic.
        topic: String,
        /// Epoch.
        epoch: u64,
    },
    /// `progress/<group>/<topic>/<partition>`.
    Progress {
        /// Consumer group (may contain `/`).
        group: String,
        /// Data topic.
        topic: String,
        /// Partition.
        partition: u32,
    },
}

impl HandoffKey {
    /// The key as written on the topic.
    #[must_use]
    pub fn encode(&self) -> String {
        match self {
            HandoffKey::Lease { topic, producer } => format!("lease2/{topic}/{producer}"),
            HandoffKey::Marker { topic, producer } => format!("marker/{topic}/{producer}"),
            HandoffKey::Assignment { topic, epoch } => format!("assignment/{topic}/{epoch}"),
            HandoffKey::Progress {
                group,
                topic,
                partition,
            } => format!("progress/{group}/{topic}/{partition}"),
        }
    }

    /// Parse a key; `None` for anything else (foreign or malformed keys are ignored by readers).
    #[must_use]
    pub fn parse(key: &[u8]) -> Option<Self> {
        let key = std::str::from_utf8(key).ok()?;
        let (kind, rest) = key.split_once('/')?;
        match kind {
            "lease2" | "marker" => {
                let (topic, producer) = rest.rsplit_once('/')?;
                (!topic.is_empty()).then_some(())?;
                let topic = topic.to_owned();
                let producer = ProducerId::parse(producer)?;
                Some(match kind {
                    "lease2" => HandoffKey::Lease { topic, producer },
                    _ => HandoffKey::Marker { topic, producer },
                })
            }
            "assignment" => {
                let (topic, epoch) = rest.rsplit_once('/')?;
                (!topic.is_empty()).then_some(())?;
                Some(HandoffKey::Assignment {
                    topic: topic.to_owned(),
                    epoch: epoch.parse().ok()?,
                })
            }
            "progress" => {
                let (rest, partition) = rest.rsplit_once('/')?;
                let (group, topic) = rest.rsplit_once('/')?;
                (!topic.is_empty() && !group.is_empty()).then_some(())?;
                Some(HandoffKey::Progress {
                    group: group.to_owned(),
                    topic: topic.to_owned(),
                    partition: partition.parse().ok()?,
                })
            }
            _ => None,
        }
    }

    /// The data topic the key is about.
    #[must_use]
    pub fn topic(&self) -> &str {
        match self {
            HandoffKey::Lease { topic, .. }
            | HandoffKey::Marker { topic, .. }
            | HandoffKey::Assignment { topic, .. }
            | HandoffKey::Progress { topic, .. } => topic,
        }
    }

    /// The key a lease is written under.
    #[must_use]
    pub fn of_lease(lease: &Lease) -> Self {
        HandoffKey::Lease {
            topic: lease.topic.clone(),
            producer: lease.producer.clone(),
        }
    }
}

/// One decoded handoff-topic record.
#[derive(Clone, Debug)]
pub enum HandoffEntry {
    /// A lease was written (registered, renewed, or closed).
    Lease(Lease),
    /// History: the assignment of an epoch.
    History(Arc<Assignment>),
    /// A group's progress on a partition.
    Progress(Progress),
    /// An ordering producer's marker.
    Marker(Marker),
    /// A marker record that did not decode: skipped, but counted by the consumers of its topic.
    MarkerRejected {
        /// The data topic its key names.
        topic: String,
        /// Why.
        reason: MarkerReject,
    },
    /// A tombstone for the key.
    Removed(HandoffKey),
}

impl HandoffEntry {
    /// The data topic the entry is about.
    #[must_use]
    pub fn topic(&self) -> &str {
        match self {
            HandoffEntry::Lease(l) => &l.topic,
            HandoffEntry::History(a) => a.topic(),
            HandoffEntry::Progress(p) => &p.topic,
            HandoffEntry::Marker(m) => &m.topic,
            HandoffEntry::MarkerRejected { topic, .. } => topic,
            HandoffEntry::Removed(k) => k.topic(),
        }
    }
}

/// Decode one record. Errors (with a reason for the log) for unknown keys, malformed values and
/// values that contradict their key: a reader skips them and keeps its state. A marker that does
/// not decode is an entry ([`HandoffEntry::MarkerRejected`]), so that its topic's consumers count
/// it.
pub fn decode(
    key: Option<&[u8]>,
    value: Option<&[u8]>,
) -> std::result::Result<HandoffEntry, String> {
    let raw = key.ok_or("record has no key")?;
    let key = HandoffKey::parse(raw)
        .ok_or_else(|| format!("unknown key {:?}", String::from_utf8_lossy(raw)))?;
    let Some(value) = value else {
        return Ok(HandoffEntry::Removed(key));
    };
    match &key {
        HandoffKey::Lease { topic, producer } => {
            let lease: Lease = serde_json::from_slice(value).map_err(|e| e.to_string())?;
            if &lease.topic != topic || &lease.producer != producer {
                return Err(format!(
                    "lease value for {}/{} under key {}",
                    lease.topic,
                    lease.producer,
                    key.encode()
                ));
            }
            Ok(HandoffEntry::Lease(lease))
        }
        HandoffKey::Marker { topic, producer } => Ok(match decode_marker(topic, producer, value) {
            Ok(m) => HandoffEntry::Marker(m),
            Err(reason) => HandoffEntry::MarkerRejected {
                topic: topic.clone(),
                reason,
            },
        }),
        HandoffKey::Assignment { topic, epoch } => {
            let a = Assignment::from_json(value).map_err(|e| e.to_string())?;
            if a.topic() != topic || a.epoch() != *epoch {
                return Err(format!(
                    "assignment of {}/{} under key {}",
                    a.topic(),
                    a.epoch(),
                    key.encode()
                ));
            }
            Ok(HandoffEntry::History(Arc::new(a)))
        }
        HandoffKey::Progress {
            group,
            topic,
            partition,
        } => {
            let p: Progress = serde_json::from_slice(value).map_err(|e| e.to_string())?;
            if &p.group != group || &p.topic != topic || p.partition != *partition {
                return Err(format!(
                    "progress of {}/{}/{} under key {}",
                    p.group,
                    p.topic,
                    p.partition,
                    key.encode()
                ));
            }
            Ok(HandoffEntry::Progress(p))
        }
    }
}

/// A handoff value as JSON bytes.
#[must_use]
pub fn to_json<T: Serialize>(value: &T) -> Vec<u8> {
    // The value types are plain structs of strings, integers and maps with string keys:
    // serialization cannot fail.
    serde_json::to_vec(value).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use dkg_kafka_core::fixtures;

    fn id(c: char) -> ProducerId {
        ProducerId::parse(&c.to_string().repeat(32)).unwrap()
    }

    /// The Java producer (`java/.../Handoff.java`, `DkgKafkaProducerTest`) writes these same bytes.
    #[test]
    fn lease_and_marker_encode_as_the_java_producer_writes_them() {
        let id = ProducerId::parse("0123456789abcdef0123456789abcdef").unwrap();
        let lease = Lease {
            producer: id.clone(),
            topic: "orders".into(),
            first_epoch: 3,
            lease_ms: 30_000,
            expires_at_ms: 1_796_000_000_000,
            closed_at_epoch: None,
        };
        assert_eq!(
            String::from_utf8(to_json(&lease)).unwrap(),
            r#"{"producer":"0123456789abcdef0123456789abcdef","topic":"orders","first_epoch":3,"lease_ms":30000,"expires_at_ms":1796000000000,"mode":"marker"}"#
        );
        let closed = Lease {
            first_epoch: 0,
            lease_ms: 3_000,
            expires_at_ms: 5,
            closed_at_epoch: Some(7),
            ..lease
        };
        assert_eq!(
            String::from_utf8(to_json(&closed)).unwrap(),
            r#"{"producer":"0123456789abcdef0123456789abcdef","topic":"orders","first_epoch":0,"lease_ms":3000,"expires_at_ms":5,"closed_at_epoch":7,"mode":"marker"}"#
        );
        let marker = Marker {
            producer: id,
            topic: "orders".into(),
            epoch: 7,
            ends: vec![0, 12, 5],
        };
        assert_eq!(
            String::from_utf8(to_json(&marker)).unwrap(),
            r#"{"producer":"0123456789abcdef0123456789abcdef","topic":"orders","epoch":7,"ends":[0,12,5]}"#
        );
    }

    #[test]
    fn producer_ids_are_unique_hex() {
        let a = ProducerId::random(7);
        let b = ProducerId::random(7);
        assert_ne!(a, b);
        assert_eq!(ProducerId::parse(a.as_str()), Some(a.clone()));
        for bad in ["", "abc", &"A".repeat(32), &"g".repeat(32), &"a".repeat(33)] {
            assert_eq!(ProducerId::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn keys_round_trip_and_parse_from_the_right() {
        let cases = [
            HandoffKey::Lease {
                topic: "orders".into(),
                producer: id('a'),
            },
            HandoffKey::Assignment {
                topic: "orders.v2".into(),
                epoch: 42,
            },
            HandoffKey::Progress {
                group: "team/app/v1".into(),
                topic: "orders".into(),
                partition: 11,
            },
            HandoffKey::Marker {
                topic: "a.b".into(),
                producer: id('d'),
            },
        ];
        for key in cases {
            let encoded = key.encode();
            assert_eq!(
                HandoffKey::parse(encoded.as_bytes()),
                Some(key),
                "{encoded}"
            );
        }
        for bad in [
            "lease2/orders",
            // The design stage's barrier-mode key: unknown.
            "lease/orders/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            "assignment/orders/x",
            "progress/orders/3",
            "progress//orders/3",
            "other/x/y",
            "marker/orders",
            "lease2//aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            "marker/orders/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
            "",
        ] {
            assert_eq!(HandoffKey::parse(bad.as_bytes()), None, "{bad}");
        }
        assert_eq!(HandoffKey::parse(&[0xff, b'/']), None);
    }

    fn lease(first: u64, expires: u64, closed: Option<u64>) -> Lease {
        Lease {
            producer: id('b'),
            topic: "t".into(),
            first_epoch: first,
            lease_ms: 1000,
            expires_at_ms: expires,
            closed_at_epoch: closed,
        }
    }

    #[test]
    fn lease_awaited_table() {
        // (first_epoch, expires, closed, epoch asked, now, awaited)
        let cases = [
            (2, 100, None, 3, 50, true),
            (3, 100, None, 3, 50, false),
            (2, 100, None, 3, 100, false),
            (0, 100, Some(4), 4, 50, true),
            (0, 100, Some(4), 5, 50, false),
            // Closed: awaited up to its closing epoch also once expired (its markers exist).
            (0, 100, Some(4), 4, 200, true),
            (0, 100, Some(4), 5, 200, false),
            (4, 100, Some(4), 4, 200, false),
        ];
        for (first, expires, closed, epoch, now, want) in cases {
            assert_eq!(
                lease(first, expires, closed).awaited_for(epoch, now),
                want,
                "{first} {expires} {closed:?} {epoch} {now}"
            );
        }
    }

    #[test]
    fn values_decode_and_must_match_their_key() {
        let l = lease(1, 99, None);
        let key = HandoffKey::Lease {
            topic: "t".into(),
            producer: id('b'),
        }
        .encode();
        match decode(Some(key.as_bytes()), Some(&to_json(&l))).unwrap() {
            HandoffEntry::Lease(got) => assert_eq!(got, l),
            other => panic!("{other:?}"),
        }
        let other_key = HandoffKey::Lease {
            topic: "u".into(),
            producer: id('b'),
        }
        .encode();
        assert!(decode(Some(other_key.as_bytes()), Some(&to_json(&l))).is_err());
        assert!(decode(Some(key.as_bytes()), Some(b"{")).is_err());
        assert!(decode(None, Some(b"{}")).is_err());
        assert!(matches!(
            decode(Some(key.as_bytes()), None).unwrap(),
            HandoffEntry::Removed(HandoffKey::Lease { .. })
        ));

        let a = fixtures::assignment("t", 2, 7, vec![0, 1], &[]);
        let hk = HandoffKey::Assignment {
            topic: "t".into(),
            epoch: 7,
        }
        .encode();
        assert!(matches!(
            decode(Some(hk.as_bytes()), Some(&a.to_json())).unwrap(),
            HandoffEntry::History(got) if got.epoch() == 7
        ));
        let wrong_epoch = HandoffKey::Assignment {
            topic: "t".into(),
            epoch: 8,
        }
        .encode();
        assert!(decode(Some(wrong_epoch.as_bytes()), Some(&a.to_json())).is_err());

        let p = Progress {
            group: "g/1".into(),
            topic: "t".into(),
            partition: 3,
            drained: 4,
            passed: [(id('c'), 4)].into_iter().collect(),
            committed_offset: 17,
            updated_at_ms: 5,
        };
        let pk = HandoffKey::Progress {
            group: "g/1".into(),
            topic: "t".into(),
            partition: 3,
        }
        .encode();
        match decode(Some(pk.as_bytes()), Some(&to_json(&p))).unwrap() {
            HandoffEntry::Progress(got) => assert_eq!(got, p),
            other => panic!("{other:?}"),
        }
    }

    fn marker_key(topic: &str, c: char) -> Vec<u8> {
        HandoffKey::Marker {
            topic: topic.into(),
            producer: id(c),
        }
        .encode()
        .into_bytes()
    }

    fn rejected(key: &[u8], value: &[u8]) -> Option<MarkerReject> {
        match decode(Some(key), Some(value)).unwrap() {
            HandoffEntry::MarkerRejected { reason, topic } => {
                assert_eq!(topic, "t");
                Some(reason)
            }
            HandoffEntry::Marker(_) => None,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn markers_decode_strictly() {
        let key = marker_key("t", 'b');
        let m = Marker {
            producer: id('b'),
            topic: "t".into(),
            epoch: 4,
            ends: vec![0, 17, 3],
        };
        match decode(Some(&key), Some(&to_json(&m))).unwrap() {
            HandoffEntry::Marker(got) => assert_eq!(got, m),
            other => panic!("{other:?}"),
        }
        let b = "b".repeat(32);
        let c = "c".repeat(32);
        let cases: Vec<(String, Option<MarkerReject>)> = vec![
            // Unknown members are ignored, as in every handoff value.
            (
                format!(r#"{{"producer":"{b}","topic":"t","epoch":1,"ends":[5],"x":1}}"#),
                None,
            ),
            ("{".into(), Some(MarkerReject::MalformedJson)),
            ("[]".into(), Some(MarkerReject::MalformedJson)),
            (
                format!(r#"{{"producer":"{b}","topic":"t","epoch":1}}"#),
                Some(MarkerReject::MalformedJson),
            ),
            (
                format!(r#"{{"producer":"{b}","topic":"t","epoch":1,"epoch":2,"ends":[1]}}"#),
                Some(MarkerReject::MalformedJson),
            ),
            (
                format!(r#"{{"producer":"{b}","topic":"t","epoch":-1,"ends":[1]}}"#),
                Some(MarkerReject::MalformedJson),
            ),
            (
                format!(r#"{{"producer":"{b}","topic":"t","epoch":1,"ends":[1.5]}}"#),
                Some(MarkerReject::MalformedJson),
            ),
            (
                format!(r#"{{"producer":"{b}","topic":"u","epoch":1,"ends":[1]}}"#),
                Some(MarkerReject::KeyMismatch),
            ),
            (
                format!(r#"{{"producer":"{c}","topic":"t","epoch":1,"ends":[1]}}"#),
                Some(MarkerReject::KeyMismatch),
            ),
            (
                format!(r#"{{"producer":"{b}","topic":"t","epoch":0,"ends":[1]}}"#),
                Some(MarkerReject::Invalid),
            ),
            (
                format!(r#"{{"producer":"{b}","topic":"t","epoch":1,"ends":[]}}"#),
                Some(MarkerReject::Invalid),
            ),
            (
                format!(r#"{{"producer":"{b}","topic":"t","epoch":1,"ends":[3,-1]}}"#),
                Some(MarkerReject::Invalid),
            ),
        ];
        for (value, want) in cases {
            assert_eq!(rejected(&key, value.as_bytes()), want, "{value}");
        }
        let many = format!(
            r#"{{"producer":"{b}","topic":"t","epoch":1,"ends":[{}0]}}"#,
            "0,".repeat(MAX_MARKER_PARTITIONS)
        );
        assert_eq!(
            rejected(&key, many.as_bytes()),
            Some(MarkerReject::Oversize)
        );
        let huge = vec![b' '; MAX_MARKER_BYTES + 1];
        assert_eq!(rejected(&key, &huge), Some(MarkerReject::Oversize));
        assert!(matches!(
            decode(Some(&key), None).unwrap(),
            HandoffEntry::Removed(HandoffKey::Marker { .. })
        ));
        let labels: Vec<&str> = MarkerReject::ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(
            labels,
            [
                "oversize",
                "malformed_json",
                "key_mismatch",
                "invalid",
                "partition_count"
            ]
        );
        assert!(
            MarkerReject::ALL
                .iter()
                .enumerate()
                .all(|(i, r)| r.index() == i)
        );
    }

    #[test]
    fn leases_live_under_lease2_and_ignore_their_mode_member() {
        let l = lease(1, 99, None);
        let json = to_json(&l);
        assert!(String::from_utf8_lossy(&json).ends_with(r#","mode":"marker"}"#));
        let key = HandoffKey::of_lease(&l).encode();
        assert_eq!(key, format!("lease2/t/{}", "b".repeat(32)));
        // `mode` is a fixed member: absent or any other value decodes the same lease.
        let text = String::from_utf8(json).unwrap();
        for value in [
            text.clone(),
            text.replace(r#","mode":"marker""#, ""),
            text.replace(r#""mode":"marker""#, r#""mode":"other""#),
        ] {
            match decode(Some(key.as_bytes()), Some(value.as_bytes())).unwrap() {
                HandoffEntry::Lease(got) => assert_eq!(got, l),
                other => panic!("{other:?}"),
            }
        }
        // Under any other key a lease is nothing a reader knows.
        let other = format!("lease/t/{}", "b".repeat(32));
        assert!(decode(Some(other.as_bytes()), Some(text.as_bytes())).is_err());
    }
}
