//! [`DkgMessage`]: the owned record [`DkgConsumer::recv`](super::DkgConsumer::recv) returns.

use std::sync::Arc;

use rdkafka::Timestamp;
use rdkafka::message::{BorrowedMessage, Headers, Message, OwnedHeaders, OwnedMessage};

use crate::kafka::handoff::{BARRIER_HEADER, PRODUCER_HEADER, ProducerId};
use crate::kafka::router::EPOCH_HEADER;

/// A record handed to the application: an owned copy (key, payload, headers) plus where it came
/// from and the DKG epoch that placed it.
///
/// (It cannot implement rdkafka's `Message` trait, whose `payload_mut` is an `unsafe fn` and this
/// crate forbids unsafe code; [`DkgMessage::into_owned_message`] converts.)
#[derive(Debug)]
pub struct DkgMessage {
    key: Option<Vec<u8>>,
    payload: Option<Vec<u8>>,
    headers: Option<OwnedHeaders>,
    topic: Arc<str>,
    partition: i32,
    offset: i64,
    timestamp: Timestamp,
    epoch: Option<u64>,
}

impl DkgMessage {
    pub(crate) fn from_borrowed(
        m: &BorrowedMessage<'_>,
        topic: &Arc<str>,
        epoch: Option<u64>,
    ) -> Self {
        Self {
            key: m.key().map(<[u8]>::to_vec),
            payload: m.payload().map(<[u8]>::to_vec),
            headers: m.headers().map(rdkafka::message::BorrowedHeaders::detach),
            topic: Arc::clone(topic),
            partition: m.partition(),
            offset: m.offset(),
            timestamp: m.timestamp(),
            epoch,
        }
    }

    /// The record key.
    #[must_use]
    pub fn key(&self) -> Option<&[u8]> {
        self.key.as_deref()
    }

    /// The record value.
    #[must_use]
    pub fn payload(&self) -> Option<&[u8]> {
        self.payload.as_deref()
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

    /// Take the key.
    pub fn take_key(&mut self) -> Option<Vec<u8>> {
        self.key.take()
    }

    /// Take the value.
    pub fn take_payload(&mut self) -> Option<Vec<u8>> {
        self.payload.take()
    }

    /// Convert into rdkafka's `OwnedMessage`.
    #[must_use]
    pub fn into_owned_message(self) -> OwnedMessage {
        OwnedMessage::new(
            self.payload,
            self.key,
            self.topic.to_string(),
            self.timestamp,
            self.partition,
            self.offset,
            self.headers,
        )
    }
}

/// The DKG headers of a record, read in one pass.
#[derive(Debug, Default)]
pub(crate) struct DkgHeaders {
    pub(crate) epoch: Option<u64>,
    pub(crate) barrier: Option<u64>,
    pub(crate) producer: Option<ProducerId>,
}

fn decimal(v: Option<&[u8]>) -> Option<u64> {
    let v = v?;
    if v.is_empty() || v.len() > 20 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(v).ok()?.parse().ok()
}

impl DkgHeaders {
    /// Read the `dkg-*` headers (the last of each name wins; malformed values are ignored).
    pub(crate) fn read<H: Headers>(headers: Option<&H>) -> Self {
        let mut out = Self::default();
        let Some(headers) = headers else {
            return out;
        };
        for h in headers.iter() {
            if !h.key.starts_with("dkg-") {
                continue;
            }
            match h.key {
                EPOCH_HEADER => out.epoch = decimal(h.value).or(out.epoch),
                BARRIER_HEADER => out.barrier = decimal(h.value).or(out.barrier),
                PRODUCER_HEADER => {
                    if let Some(id) = h
                        .value
                        .and_then(|v| std::str::from_utf8(v).ok())
                        .and_then(ProducerId::parse)
                    {
                        out.producer = Some(id);
                    }
                }
                _ => {}
            }
        }
        out
    }

    /// A valid barrier: both headers present.
    pub(crate) fn barrier(&self) -> Option<(ProducerId, u64)> {
        Some((self.producer.clone()?, self.barrier?))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use rdkafka::message::Header;

    use super::*;

    #[test]
    fn headers_parse_table() {
        let id = "0123456789abcdef0123456789abcdef";
        // (headers, epoch, barrier, producer?)
        let cases: Vec<(Vec<(&str, Option<&[u8]>)>, Option<u64>, Option<u64>, bool)> = vec![
            (vec![], None, None, false),
            (vec![("dkg-epoch", Some(b"12"))], Some(12), None, false),
            (vec![("dkg-epoch", Some(b"x1"))], None, None, false),
            (vec![("dkg-epoch", None)], None, None, false),
            (
                vec![
                    ("dkg-barrier", Some(b"3")),
                    ("dkg-producer", Some(id.as_bytes())),
                ],
                None,
                Some(3),
                true,
            ),
            (
                vec![("dkg-barrier", Some(b"3")), ("dkg-producer", Some(b"nope"))],
                None,
                Some(3),
                false,
            ),
            (
                vec![
                    ("app", Some(b"1")),
                    ("dkg-epoch", Some(b"1")),
                    ("dkg-epoch", Some(b"2")),
                ],
                Some(2),
                None,
                false,
            ),
            (
                vec![("dkg-epoch", Some(b"99999999999999999999999"))],
                None,
                None,
                false,
            ),
        ];
        for (hs, epoch, barrier, producer) in cases {
            let mut owned = OwnedHeaders::new();
            for (k, v) in &hs {
                owned = owned.insert(Header { key: k, value: *v });
            }
            let got = DkgHeaders::read(Some(&owned));
            assert_eq!(
                (got.epoch, got.barrier, got.producer.is_some()),
                (epoch, barrier, producer),
                "{hs:?}"
            );
            assert_eq!(got.barrier().is_some(), barrier.is_some() && producer);
        }
        assert!(DkgHeaders::read::<OwnedHeaders>(None).epoch.is_none());
    }
}
