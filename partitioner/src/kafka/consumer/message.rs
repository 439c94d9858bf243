//! [`DkgMessage`]: the owned record [`DkgConsumer::recv`](super::DkgConsumer::recv) returns.

use std::sync::Arc;

use rdkafka::Timestamp;
use rdkafka::message::{BorrowedMessage, Headers, Message, OwnedHeaders, OwnedMessage};

pub(crate) use dkg_kafka_protocol::headers::DkgHeaders;

/// A record handed to the application: an owned copy (key, payload, headers) plus where it came
/// from and the DKG epoch that placed it.
///
/// (It cannot implement rdkafka's `Message` trait, whose `payload_mut` is an `unsafe fn` and this
/// crate forbids unsafe code; [`DkgMessage::into_owned_message`] converts.)
#[derive(Debug)]
pub struct DkgMessage {
    /// Key and payload in one allocation.
    buf: Vec<u8>,
    /// Length of the key at the start of `buf`; `None`: no key.
    key_len: Option<usize>,
    has_payload: bool,
    headers: Option<OwnedHeaders>,
    topic: Arc<str>,
    partition: i32,
    offset: i64,
    timestamp: Timestamp,
    epoch: Option<u64>,
    split: Option<u32>,
}

impl DkgMessage {
    /// A copy of `m`. `has_headers: false` says `m` has no headers (already asked: librdkafka
    /// allocates and parses afresh on every call for a record without headers).
    pub(crate) fn from_borrowed(
        m: &BorrowedMessage<'_>,
        topic: &Arc<str>,
        epoch: Option<u64>,
        split: Option<u32>,
        has_headers: bool,
    ) -> Self {
        let (key, payload) = (m.key(), m.payload());
        let mut buf =
            Vec::with_capacity(key.map_or(0, <[u8]>::len) + payload.map_or(0, <[u8]>::len));
        if let Some(k) = key {
            buf.extend_from_slice(k);
        }
        if let Some(p) = payload {
            buf.extend_from_slice(p);
        }
        Self {
            buf,
            key_len: key.map(<[u8]>::len),
            has_payload: payload.is_some(),
            headers: if has_headers {
                m.headers().map(rdkafka::message::BorrowedHeaders::detach)
            } else {
                None
            },
            topic: Arc::clone(topic),
            partition: m.partition(),
            offset: m.offset(),
            timestamp: m.timestamp(),
            epoch,
            split,
        }
    }

    /// The record key.
    #[must_use]
    pub fn key(&self) -> Option<&[u8]> {
        self.key_len.and_then(|k| self.buf.get(..k))
    }

    /// The record value.
    #[must_use]
    pub fn payload(&self) -> Option<&[u8]> {
        if !self.has_payload {
            return None;
        }
        self.buf.get(self.key_len.unwrap_or(0)..)
    }

    /// The record headers (including `dkg-epoch` when a DKG assignment placed it).
    #[must_use]
    pub fn headers(&self) -> Option<&OwnedHeaders> {
        self.headers.as_ref()
    }

    /// The topic.
    #[must_use]
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// The partition.
    #[must_use]
    pub fn partition(&self) -> i32 {
        self.partition
    }

    /// The offset.
    #[must_use]
    pub fn offset(&self) -> i64 {
        self.offset
    }

    /// The record timestamp.
    #[must_use]
    pub fn timestamp(&self) -> Timestamp {
        self.timestamp
    }

    /// The epoch of the assignment that placed the record (its `dkg-epoch` header); `None` for
    /// records placed by Kafka's default partitioner (no assignment in effect, or a producer without
    /// DKG).
    #[must_use]
    pub fn epoch(&self) -> Option<u64> {
        self.epoch
    }

    /// Over how many partitions the record's key is split in the record's epoch (`None`: the
    /// key is whole there, strict key grouping). A split key's records are spread over its
    /// parts by every producer: their order across the parts is not kept, and each part's
    /// consumer sees only some of them (aggregate per partition, merge downstream). Decided
    /// from the assignment history when the record arrives; where its epoch is ambiguous (a
    /// switch in progress) the answer errs towards split (`docs/spec.md` 9.3, C14).
    #[must_use]
    pub fn split_parts(&self) -> Option<u32> {
        self.split
    }

    /// Convert into rdkafka's `OwnedMessage`.
    #[must_use]
    pub fn into_owned_message(self) -> OwnedMessage {
        let (key, payload) = (
            self.key().map(<[u8]>::to_vec),
            self.payload().map(<[u8]>::to_vec),
        );
        OwnedMessage::new(
            payload,
            key,
            self.topic.to_string(),
            self.timestamp,
            self.partition,
            self.offset,
            self.headers,
        )
    }
}

/// A record from [`DkgConsumer::recv_borrowed`](super::DkgConsumer::recv_borrowed): borrowed
/// from librdkafka when handed out at once (no copy), owned when it was held.
#[derive(Debug)]
pub enum DkgRecord<'a> {
    /// Straight from librdkafka's queue.
    Fetched {
        /// The message.
        msg: BorrowedMessage<'a>,
        /// Its `dkg-epoch` header.
        epoch: Option<u64>,
        /// See [`DkgMessage::split_parts`].
        split: Option<u32>,
    },
    /// Held for a while (a moved key), copied.
    Released(DkgMessage),
}

impl DkgRecord<'_> {
    /// The record key.
    #[must_use]
    pub fn key(&self) -> Option<&[u8]> {
        match self {
            DkgRecord::Fetched { msg, .. } => msg.key(),
            DkgRecord::Released(m) => m.key(),
        }
    }

    /// The record value.
    #[must_use]
    pub fn payload(&self) -> Option<&[u8]> {
        match self {
            DkgRecord::Fetched { msg, .. } => msg.payload(),
            DkgRecord::Released(m) => m.payload(),
        }
    }

    /// The partition.
    #[must_use]
    pub fn partition(&self) -> i32 {
        match self {
            DkgRecord::Fetched { msg, .. } => msg.partition(),
            DkgRecord::Released(m) => m.partition(),
        }
    }

    /// The offset.
    #[must_use]
    pub fn offset(&self) -> i64 {
        match self {
            DkgRecord::Fetched { msg, .. } => msg.offset(),
            DkgRecord::Released(m) => m.offset(),
        }
    }

    /// The record timestamp.
    #[must_use]
    pub fn timestamp(&self) -> Timestamp {
        match self {
            DkgRecord::Fetched { msg, .. } => msg.timestamp(),
            DkgRecord::Released(m) => m.timestamp(),
        }
    }

    /// The epoch of the assignment that placed the record, if it carries one (see
    /// [`DkgMessage::epoch`]).
    #[must_use]
    pub fn epoch(&self) -> Option<u64> {
        match self {
            DkgRecord::Fetched { epoch, .. } => *epoch,
            DkgRecord::Released(m) => m.epoch(),
        }
    }

    /// Over how many partitions the record's key is split in its epoch (see
    /// [`DkgMessage::split_parts`]).
    #[must_use]
    pub fn split_parts(&self) -> Option<u32> {
        match self {
            DkgRecord::Fetched { split, .. } => *split,
            DkgRecord::Released(m) => m.split_parts(),
        }
    }

    /// Whether the record was held back (its key moved and waited for its old partition).
    #[must_use]
    pub fn was_held(&self) -> bool {
        matches!(self, DkgRecord::Released(_))
    }

    /// An owned copy.
    #[must_use]
    pub fn detach(self) -> DkgMessage {
        match self {
            DkgRecord::Fetched { msg, epoch, split } => {
                let topic: Arc<str> = Arc::from(msg.topic());
                DkgMessage::from_borrowed(&msg, &topic, epoch, split, true)
            }
            DkgRecord::Released(m) => m,
        }
    }

    /// An owned copy sharing `topic` (`has_headers`: see [`DkgMessage::from_borrowed`]).
    pub(crate) fn detach_with(self, topic: &Arc<str>, has_headers: bool) -> DkgMessage {
        match self {
            DkgRecord::Fetched { msg, epoch, split } => {
                DkgMessage::from_borrowed(&msg, topic, epoch, split, has_headers)
            }
            DkgRecord::Released(m) => m,
        }
    }
}

/// The DKG headers of an rdkafka record ([`DkgHeaders::read`] over its `(name, value)` pairs).
pub(crate) fn dkg_headers<H: Headers>(headers: Option<&H>) -> DkgHeaders {
    DkgHeaders::read(headers.map(|h| h.iter().map(|h| (h.key, h.value))))
}
