//! Fuzz the `dkg-*` header parsers (`dkg_kafka_protocol::headers`, spec section 8): every record's headers
//! (framed as name = key, value as in `frames.rs`; non-UTF-8 names are skipped like a client would
//! never deliver them) read without a panic; `DkgHeaders::read` agrees with `epoch_of`; a decimal
//! value parses exactly when it is 1 to 20 ASCII digits that fit a u64, and round-trips.
#![no_main]

use dkg_kafka_protocol::headers::{DkgHeaders, encode_decimal, epoch_of, parse_decimal};
use libfuzzer_sys::fuzz_target;

#[path = "frames.rs"]
mod frames;

fuzz_target!(|data: &[u8]| {
    let headers: Vec<(&str, Option<&[u8]>)> = frames::records(data)
        .into_iter()
        .filter_map(|(name, value)| Some((std::str::from_utf8(name?).ok()?, value)))
        .collect();
    let read = DkgHeaders::read(Some(headers.iter().copied()));
    assert!(read.present);
    assert_eq!(read.epoch, epoch_of(headers.iter().copied()));
    assert_eq!(DkgHeaders::read(None::<Vec<(&str, Option<&[u8]>)>>), DkgHeaders::default());
    for &(_, value) in &headers {
        let parsed = parse_decimal(value);
        let expected = value
            .filter(|v| !v.is_empty() && v.len() <= 20 && v.iter().all(u8::is_ascii_digit))
            .and_then(|v| std::str::from_utf8(v).ok()?.parse::<u64>().ok());
        assert_eq!(parsed, expected, "{value:?}");
        if let Some(n) = parsed {
            let mut buf = [0_u8; 20];
            assert_eq!(parse_decimal(Some(encode_decimal(n, &mut buf))), Some(n));
        }
    }
});
