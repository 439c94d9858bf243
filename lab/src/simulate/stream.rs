//! An in-memory key stream: interned distinct keys plus the record sequence as key indices.
//!
//! Interning lets every per-key decision (a hash, an assignment lookup) be computed once per distinct
//! key instead of once per record; the per-record work is then an array index. Streams come from a key
//! trace or from the tools' Zipf workload ([`generate`], see [`dkg_sampler::workload`]).

use std::path::Path;

use ahash::AHashMap;
use anyhow::{Context, bail};

use dkg_sampler::workload::ZipfKeys;

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

/// Parameters of one synthetic stream.
#[derive(Clone, Copy, Debug)]
pub struct ZipfSpec {
    /// Key universe size.
    pub n: u32,
    /// Zipf exponent (>= 0; 0 is uniform).
    pub alpha: f64,
    /// Records in the stream.
    pub m: usize,
    /// RNG seed: the permutation and the draws are a pure function of it.
    pub seed: u64,
}

/// Generates the stream from the tools' workload ([`ZipfKeys`]): a per-seed random permutation of key
/// ids, then `m` i.i.d. Zipf draws.
///
/// Key index `r` in the returned [`Stream`] is the key of rank `r + 1`, so `Stream::counts()[0]` is the
/// count of the most probable key; its bytes are the decimal string of its permuted id.
pub fn generate(spec: &ZipfSpec) -> Option<Stream> {
    let mut zipf = ZipfKeys::new(spec.n, spec.alpha, spec.seed)?;
    let mut records = Vec::with_capacity(spec.m);
    for _ in 0..spec.m {
        records.push(zipf.next_rank());
    }
    let keys = zipf.ids().iter().map(|id| id.to_string().into_bytes());
    Some(Stream::from_parts(keys, records))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use dkg_sampler::workload::zipf_probabilities;

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

    /// Empirical frequencies of 4 * 10^5 draws are within 5 standard errors of p_i for every rank, and the
    /// chi-square statistic is plausible for the degrees of freedom.
    #[test]
    fn empirical_frequencies_match_zipf() {
        for &alpha in &[0.5, 1.0, 1.5] {
            let n = 200;
            let m = 400_000;
            let stream = generate(&ZipfSpec {
                n,
                alpha,
                m,
                seed: 42,
            })
            .unwrap();
            let counts = stream.counts();
            let p = zipf_probabilities(n, alpha);
            let mut chi2 = 0.0;
            for (i, (&c, &pi)) in counts.iter().zip(&p).enumerate() {
                let expected = pi * m as f64;
                let sd = (m as f64 * pi * (1.0 - pi)).sqrt();
                assert!(
                    (c as f64 - expected).abs() <= 5.0 * sd + 1.0,
                    "alpha={alpha} rank={} count={c} expected={expected:.1} sd={sd:.1}",
                    i + 1
                );
                chi2 += (c as f64 - expected).powi(2) / expected;
            }
            // df = 199: mean 199, sd ~ 20; 320 is ~6 sd out.
            assert!(chi2 < 320.0, "alpha={alpha} chi2={chi2}");
        }
    }

    #[test]
    fn generation_is_reproducible_and_permuted() {
        let spec = ZipfSpec {
            n: 1000,
            alpha: 1.0,
            m: 10_000,
            seed: 3,
        };
        let a = generate(&spec).unwrap();
        let b = generate(&spec).unwrap();
        assert_eq!(a.records(), b.records());
        assert_eq!(a.key(0), b.key(0));
        let c = generate(&ZipfSpec { seed: 4, ..spec }).unwrap();
        // Different seeds permute ids differently (the chance that 5 top ranks coincide is ~1e-15).
        assert!((0..5).any(|r| a.key(r) != c.key(r)));
        // Every id 0..n appears exactly once as a key.
        let mut ids: Vec<u32> = (0..1000)
            .map(|r| std::str::from_utf8(a.key(r)).unwrap().parse().unwrap())
            .collect();
        ids.sort_unstable();
        assert_eq!(ids, (0..1000).collect::<Vec<u32>>());
    }
}
