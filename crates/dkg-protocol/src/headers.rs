//! The `dkg-*` record headers and their one codec (`docs/spec.md` section 8).
//!
//! | header | value | on |
//! |---|---|---|
//! | [`EPOCH_HEADER`] `dkg-epoch` | the epoch of the assignment that placed the record | data records (all, or those of moved keys: the producer's `EpochHeader` mode) |
//! | [`BARRIER_HEADER`] `dkg-barrier` | the epoch whose barrier the record is | barrier records (null key and value), one per partition |
//! | [`PRODUCER_HEADER`] `dkg-producer` | the writing producer's [`ProducerId`] | barrier records |
//!
//! Every value is plain decimal ASCII ([`parse_decimal`], [`encode_decimal`]) or a producer id; a
//! malformed value is ignored, and of several headers with one name the last well-formed one
//! counts ([`DkgHeaders::read`], [`epoch_of`]). The Kafka glue adapts rdkafka's header types to
//! the `(name, value)` pairs taken here; see `docs/architecture.md`.

use crate::handoff::ProducerId;

/// Name of the header carrying the epoch (decimal ASCII) of the assignment that placed a record.
///
/// Absent on records placed by Kafka's default hashing (fallback, or producers without DKG).
pub const EPOCH_HEADER: &str = "dkg-epoch";

/// Header of a barrier record: the epoch (decimal ASCII) whose barrier it is.
pub const BARRIER_HEADER: &str = "dkg-barrier";

/// Header naming the producer instance ([`ProducerId`]) that wrote a barrier record.
pub const PRODUCER_HEADER: &str = "dkg-producer";

/// A `dkg-*` header value: plain decimal ASCII (no sign, no spaces) that fits a `u64`.
#[must_use]
pub fn parse_decimal(v: Option<&[u8]>) -> Option<u64> {
    let v = v?;
    if v.is_empty() || v.len() > 20 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(v).ok()?.parse().ok()
}

/// `n` as decimal ASCII in `buf`, without allocating (the hot path stamps every moved record).
pub fn encode_decimal(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    &buf[i..]
}

/// The epoch stamped on a record: its last well-formed [`EPOCH_HEADER`], if any (the rule the
/// consumer reads records by).
pub fn epoch_of<'a>(headers: impl IntoIterator<Item = (&'a str, Option<&'a [u8]>)>) -> Option<u64> {
    headers
        .into_iter()
        .filter(|(key, _)| *key == EPOCH_HEADER)
        .fold(None, |epoch, (_, value)| parse_decimal(value).or(epoch))
}

/// The DKG headers of a record, read in one pass.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct DkgHeaders {
    /// The record has headers (of any name).
    pub present: bool,
    /// The last well-formed [`EPOCH_HEADER`].
    pub epoch: Option<u64>,
    /// The last well-formed [`BARRIER_HEADER`].
    pub barrier: Option<u64>,
    /// The last well-formed [`PRODUCER_HEADER`].
    pub producer: Option<ProducerId>,
}

impl DkgHeaders {
    /// Read the `dkg-*` headers of a record (`None`: it has no headers at all); the last of each
    /// name wins, malformed values are ignored.
    pub fn read<'a>(
        headers: Option<impl IntoIterator<Item = (&'a str, Option<&'a [u8]>)>>,
    ) -> Self {
        let mut out = Self::default();
        let Some(headers) = headers else {
            return out;
        };
        out.present = true;
        for (key, value) in headers {
            if !key.starts_with("dkg-") {
                continue;
            }
            match key {
                EPOCH_HEADER => out.epoch = parse_decimal(value).or(out.epoch),
                BARRIER_HEADER => out.barrier = parse_decimal(value).or(out.barrier),
                PRODUCER_HEADER => {
                    if let Some(id) = value
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
    #[must_use]
    pub fn barrier(&self) -> Option<(ProducerId, u64)> {
        Some((self.producer.clone()?, self.barrier?))
    }

    /// Whether a record with these headers, `key` and `value` is a barrier record, and whose: both
    /// headers well-formed, null key and null value (what every ordering producer writes, spec
    /// 9.2). Anything else is data, even with a `dkg-barrier` header: consuming it as a barrier
    /// would lose an application's record.
    #[must_use]
    pub fn barrier_record(
        &self,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
    ) -> Option<(ProducerId, u64)> {
        if key.is_some() || value.is_some() {
            return None;
        }
        self.barrier()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_round_trips_and_rejects_non_digits() {
        let mut buf = [0_u8; 20];
        for n in [0, 1, 9, 10, 99, 12_345, u64::MAX] {
            assert_eq!(encode_decimal(n, &mut buf), n.to_string().as_bytes());
            let digits = encode_decimal(n, &mut buf).to_vec();
            assert_eq!(parse_decimal(Some(&digits)), Some(n));
        }
        for bad in [
            &b""[..],
            b"+5",
            b"-1",
            b" 1",
            b"1x",
            b"99999999999999999999999",
        ] {
            assert_eq!(parse_decimal(Some(bad)), None, "{bad:?}");
        }
        assert_eq!(parse_decimal(None), None);
    }

    #[test]
    fn only_null_records_with_both_headers_are_barriers() {
        let id = ProducerId::parse(&"c".repeat(32)).expect("a valid id");
        let full = DkgHeaders {
            present: true,
            epoch: None,
            barrier: Some(4),
            producer: Some(id.clone()),
        };
        let no_producer = DkgHeaders {
            producer: None,
            ..full.clone()
        };
        type Case<'a> = (&'a DkgHeaders, Option<&'a [u8]>, Option<&'a [u8]>, bool);
        // (headers, key, value, barrier?)
        let cases: [Case<'_>; 5] = [
            (&full, None, None, true),
            (&full, Some(b"k"), None, false),
            (&full, None, Some(b""), false),
            (&no_producer, None, None, false),
            (&DkgHeaders::default(), None, None, false),
        ];
        for (h, key, value, want) in cases {
            assert_eq!(
                h.barrier_record(key, value),
                want.then(|| (id.clone(), 4)),
                "{h:?} {key:?} {value:?}"
            );
        }
    }

    #[test]
    fn headers_parse_table() {
        let id = "0123456789abcdef0123456789abcdef";
        // (headers, epoch, barrier, producer?)
        type Case<'a> = (
            Vec<(&'a str, Option<&'a [u8]>)>,
            Option<u64>,
            Option<u64>,
            bool,
        );
        let cases: Vec<Case<'_>> = vec![
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
            let got = DkgHeaders::read(Some(hs.iter().copied()));
            assert_eq!(
                (got.epoch, got.barrier, got.producer.is_some()),
                (epoch, barrier, producer),
                "{hs:?}"
            );
            assert_eq!(got.barrier().is_some(), barrier.is_some() && producer);
            assert_eq!(epoch_of(hs.iter().copied()), epoch, "{hs:?}");
            assert!(got.present);
        }
        let none = DkgHeaders::read(None::<Vec<(&str, Option<&[u8]>)>>);
        assert!(none.epoch.is_none() && !none.present);
    }
}
