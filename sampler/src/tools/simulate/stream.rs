//! An in-memory key stream: interned distinct keys plus the record sequence as key indices.
//!
//! Interning lets every per-key decision (a hash, an assignment lookup) be computed once per distinct
//! key instead of once per record; the per-record work is then an array index.

use std::path::Path;

use ahash::AHashMap;
use anyhow::{Context, bail};

/// Distinct keys (as bytes) and the records as indices into them.
#[derive(Clone, Debug)]
pub struct Stream {
    key_bytes: Vec<u8>,
    /// Key `i` is `key_bytes[offsets[i]..offsets[i + 1]]`.
    offsets: Vec<usize>,
    records: Vec<u32>,
}

impl Stream {
    /// Builds a stream from its distinct keys (index order) and record indices.
    pub fn from_parts<I, K>(keys: I, records: Vec<u32>) -> Self
    where
        I: IntoIterator<Item = K>,
        K: AsRef<[u8]>,
    {
        let mut key_bytes = Vec::new();
        let mut offsets = vec![0];
        for key in keys {
            key_bytes.extend_from_slice(key.as_ref());
            offsets.push(key_bytes.len());
        }
        debug_assert!(records.iter().all(|&r| (r as usize) < offsets.len() - 1));
        Self {
            key_bytes,
            offsets,
            records,
        }
    }

    /// Reads a trace: one key per line, the key being the line's bytes without the trailing `\n` or
    /// `\r\n`. An empty line is the empty key; a final newline does not add one.
    pub fn from_trace_file(path: &Path) -> anyhow::Result<Self> {
        let bytes = std::fs::read(path)
            .with_context(|| format!("cannot read trace file {}", path.display()))?;
        Self::from_trace_bytes(&bytes)
            .with_context(|| format!("invalid trace file {}", path.display()))
    }

    /// [`Stream::from_trace_file`] on bytes already in memory.
    pub fn from_trace_bytes(bytes: &[u8]) -> anyhow::Result<Self> {
        let body = bytes.strip_suffix(b"\n").unwrap_or(bytes);
        if bytes.is_empty() {
            bail!("the trace is empty (expected one key per line)");
        }
        let mut index: AHashMap<&[u8], u32> = AHashMap::new();
        let mut keys: Vec<&[u8]> = Vec::new();
        let mut records = Vec::new();
        for line in body.split(|&b| b == b'\n') {
            let key = line.strip_suffix(b"\r").unwrap_or(line);
            let id = match index.get(key) {
                Some(&id) => id,
                None => {
                    let id = u32::try_from(keys.len())
                        .ok()
                        .filter(|&id| id < u32::MAX)
                        .context("the trace has more than 2^32 - 1 distinct keys")?;
                    index.insert(key, id);
                    keys.push(key);
                    id
                }
            };
            records.push(id);
        }
        Ok(Self::from_parts(keys, records))
    }

    /// Bytes of key `id`. Panics if `id` is out of range (indices come from this stream).
    #[inline]
    pub fn key(&self, id: u32) -> &[u8] {
        let i = id as usize;
        &self.key_bytes[self.offsets[i]..self.offsets[i + 1]]
    }

    /// Number of distinct keys (the key universe for a Zipf stream).
    pub fn distinct(&self) -> usize {
        self.offsets.len() - 1
    }

    /// The records, as key indices.
    pub fn records(&self) -> &[u32] {
        &self.records
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Exact per-key record counts of `records` (indexed like the keys).
    pub fn counts_of(&self, records: &[u32]) -> Vec<u64> {
        let mut counts = vec![0u64; self.distinct()];
        for &r in records {
            counts[r as usize] += 1;
        }
        counts
    }

    /// Exact per-key record counts of the whole stream.
    pub fn counts(&self) -> Vec<u64> {
        self.counts_of(&self.records)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// (trace bytes, expected distinct keys, expected records)
    type Case = (&'static [u8], &'static [&'static [u8]], &'static [u32]);

    #[test]
    fn trace_lines_become_keys() {
        let cases: &[Case] = &[
            (b"a\nb\na\n", &[b"a", b"b"], &[0, 1, 0]),
            (b"a\nb\na", &[b"a", b"b"], &[0, 1, 0]),
            (b"a\r\nb\r\na\n", &[b"a", b"b"], &[0, 1, 0]),
            (b"x\n\nx\n", &[b"x", b""], &[0, 1, 0]),
            (b"\n", &[b""], &[0]),
            (b"k\xff\x00\n", &[b"k\xff\x00"], &[0]),
            (b" a \n", &[b" a "], &[0]),
        ];
        for &(input, keys, records) in cases {
            let s = Stream::from_trace_bytes(input).unwrap();
            assert_eq!(s.distinct(), keys.len(), "{input:?}");
            for (i, k) in keys.iter().enumerate() {
                assert_eq!(s.key(i as u32), *k, "{input:?}");
            }
            assert_eq!(s.records(), records, "{input:?}");
        }
    }

    #[test]
    fn empty_trace_is_an_error() {
        let err = Stream::from_trace_bytes(b"").unwrap_err();
        assert!(err.to_string().contains("empty"), "{err}");
    }

    #[test]
    fn counts_are_exact() {
        let s = Stream::from_parts(["a", "b", "c"], vec![2, 0, 2, 2]);
        assert_eq!(s.counts(), vec![1, 0, 3]);
        assert_eq!(s.counts_of(&s.records()[..2]), vec![1, 0, 1]);
        assert_eq!(s.len(), 4);
    }
}
