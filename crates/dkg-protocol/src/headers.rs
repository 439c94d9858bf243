//! The `dkg-*` record headers and their one codec (`docs/spec.md` section 8).
//!
//! | header | value | on |
//! |---|---|---|
//! | [`EPOCH_HEADER`] `dkg-epoch` | the epoch of the assignment that placed the record | data records (all, or those of moved keys: the producer's `EpochHeader` mode) |
//! | [`PRODUCER_HEADER`] `dkg-producer` | the writing producer's `ProducerId` | an ordering producer's records that carry `dkg-epoch` |
//!
//! An epoch is plain decimal ASCII ([`parse_decimal`], [`encode_decimal`]); a malformed value is
//! ignored, and of several headers with one name the last well-formed one counts
//! ([`DkgHeaders::read`], [`epoch_of`]). Consumers read only `dkg-epoch`. The Kafka glue adapts rdkafka's header types to
//! the `(name, value)` pairs taken here; see `docs/architecture.md`.

/// Name of the header carrying the epoch (decimal ASCII) of the assignment that placed a record.
///
/// Absent on records placed by Kafka's default hashing (fallback, or producers without DKG).
pub const EPOCH_HEADER: &str = "dkg-epoch";

/// Header naming the ordering producer instance (its `ProducerId`) that wrote a stamped record
/// (informative: consumers do not read it).
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
}

impl DkgHeaders {
    /// Read the `dkg-*` headers of a record (`None`: it has no headers at all); the last
    /// well-formed epoch wins, malformed values are ignored.
    pub fn read<'a>(
        headers: Option<impl IntoIterator<Item = (&'a str, Option<&'a [u8]>)>>,
    ) -> Self {
        let Some(headers) = headers else {
            return Self::default();
        };
        Self {
            present: true,
            epoch: epoch_of(headers),
        }
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
    fn headers_parse_table() {
        // (headers, epoch)
        type Case<'a> = (Vec<(&'a str, Option<&'a [u8]>)>, Option<u64>);
        let cases: Vec<Case<'_>> = vec![
            (vec![], None),
            (vec![("dkg-epoch", Some(b"12"))], Some(12)),
            (vec![("dkg-epoch", Some(b"x1"))], None),
            (vec![("dkg-epoch", None)], None),
            // The design stage's barrier header means nothing now.
            (vec![("dkg-barrier", Some(b"3"))], None),
            (
                vec![
                    ("app", Some(b"1")),
                    ("dkg-epoch", Some(b"1")),
                    ("dkg-epoch", Some(b"2")),
                    ("dkg-epoch", Some(b"bad")),
                ],
                Some(2),
            ),
            (vec![("dkg-epoch", Some(b"99999999999999999999999"))], None),
        ];
        for (hs, epoch) in cases {
            let got = DkgHeaders::read(Some(hs.iter().copied()));
            assert_eq!(got.epoch, epoch, "{hs:?}");
            assert_eq!(epoch_of(hs.iter().copied()), epoch, "{hs:?}");
            assert!(got.present);
        }
        let none = DkgHeaders::read(None::<Vec<(&str, Option<&[u8]>)>>);
        assert!(none.epoch.is_none() && !none.present);
    }
}
