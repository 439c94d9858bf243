//! The byte framing the protocol fuzzers share: an input is a sequence of records, each
//! `tag` (bit 0: key present, bit 1: value present), then the key as `len: u8` + bytes, then the
//! value as `len: u16 LE` + bytes. A truncated record ends the sequence. The seeds in
//! `fuzz/seeds/<target>/` are written in this framing (`fuzz/seeds/README.md`).

/// One framed record: key and value, each absent or bytes.
pub type Record<'a> = (Option<&'a [u8]>, Option<&'a [u8]>);

/// The records of `data`, up to the first truncated one.
pub fn records(mut data: &[u8]) -> Vec<Record<'_>> {
    let mut out = Vec::new();
    loop {
        let Some((&tag, rest)) = data.split_first() else {
            return out;
        };
        data = rest;
        let key = if tag & 1 == 1 {
            let Some((&len, rest)) = data.split_first() else {
                return out;
            };
            let Some((key, rest)) = rest.split_at_checked(usize::from(len)) else {
                return out;
            };
            data = rest;
            Some(key)
        } else {
            None
        };
        let value = if tag & 2 == 2 {
            let Some((len, rest)) = data.split_first_chunk::<2>() else {
                return out;
            };
            let Some((value, rest)) = rest.split_at_checked(usize::from(u16::from_le_bytes(*len))) else {
                return out;
            };
            data = rest;
            Some(value)
        } else {
            None
        };
        out.push((key, value));
    }
}
