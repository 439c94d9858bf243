//! Synthetic Zipf key streams.
//!
//! Key of rank `i` (1-based) has probability `p_i = i^-alpha / H(n, alpha)` (Zipf's law, as in the DKG
//! paper's evaluation). Records are drawn i.i.d. with Walker's alias method in Vose's numerically stable
//! form (M. D. Vose, "A linear algorithm for generating random numbers with a given distribution", IEEE
//! TSE 1991): O(n) set-up, O(1) per record, exact up to floating-point rounding.
//!
//! Ranks are mapped to key ids by a random permutation (per seed), and a key's bytes are the decimal
//! string of its id. Without the permutation the hot keys would be "0", "1", "2", ... and any result
//! would depend on how murmur2 happens to hash those particular strings.

use rand::Rng;
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;

use super::stream::Stream;

/// Unnormalised Zipf weights `1 / i^alpha` for ranks `i = 1..=n`.
pub fn zipf_weights(n: u32, alpha: f64) -> Vec<f64> {
    (1..=n).map(|i| f64::from(i).powf(-alpha)).collect()
}

/// Normalised Zipf probabilities `p_i` for ranks `i = 1..=n` (index 0 is rank 1).
#[cfg(test)]
pub fn zipf_probabilities(n: u32, alpha: f64) -> Vec<f64> {
    let mut w = zipf_weights(n, alpha);
    let total: f64 = w.iter().sum();
    for x in &mut w {
        *x /= total;
    }
    w
}

/// Walker/Vose alias table over `0..len` for fixed non-negative weights.
#[derive(Clone, Debug)]
pub struct AliasTable {
    /// Probability of keeping column `i` (scaled so the mean column is 1).
    keep: Vec<f64>,
    /// Where a rejected draw of column `i` goes instead.
    alias: Vec<u32>,
}

impl AliasTable {
    /// Builds the table. `weights` must be non-empty, finite, non-negative, with a positive sum, and
    /// shorter than `u32::MAX` (callers validate; violations return `None`).
    pub fn new(weights: &[f64]) -> Option<Self> {
        let len = weights.len();
        if len == 0 || u32::try_from(len).is_err() {
            return None;
        }
        if weights.iter().any(|w| !w.is_finite() || *w < 0.0) {
            return None;
        }
        let total: f64 = weights.iter().sum();
        if !(total > 0.0 && total.is_finite()) {
            return None;
        }
        let scale = len as f64 / total;
        let mut keep: Vec<f64> = weights.iter().map(|w| w * scale).collect();
        let mut alias: Vec<u32> = (0..len as u32).collect();
        let (mut small, mut large): (Vec<u32>, Vec<u32>) =
            (0..len as u32).partition(|&i| keep[i as usize] < 1.0);
        while let (Some(&s), Some(&l)) = (small.last(), large.last()) {
            small.pop();
            alias[s as usize] = l;
            // The large column donates what the small one lacks.
            keep[l as usize] -= 1.0 - keep[s as usize];
            if keep[l as usize] < 1.0 {
                large.pop();
                small.push(l);
            }
        }
        // Whatever is left is 1 up to rounding: always keep it.
        for i in small.into_iter().chain(large) {
            keep[i as usize] = 1.0;
        }
        Some(Self { keep, alias })
    }

    /// Number of outcomes.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.keep.len()
    }

    /// Draws one outcome.
    #[inline]
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> u32 {
        let column = rng.random_range(0..self.keep.len());
        if rng.random::<f64>() < self.keep[column] {
            column as u32
        } else {
            self.alias[column]
        }
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

/// Generates the stream: a per-seed random permutation of key ids, then `m` i.i.d. Zipf draws.
///
/// Key index `r` in the returned [`Stream`] is the key of rank `r + 1`, so `Stream::counts()[0]` is the
/// count of the most probable key; its bytes are the decimal string of its permuted id.
pub fn generate(spec: &ZipfSpec) -> Option<Stream> {
    let table = AliasTable::new(&zipf_weights(spec.n, spec.alpha))?;
    let mut rng = ChaCha8Rng::seed_from_u64(spec.seed);
    let mut ids: Vec<u32> = (0..spec.n).collect();
    ids.shuffle(&mut rng);
    let mut records = Vec::with_capacity(spec.m);
    for _ in 0..spec.m {
        records.push(table.sample(&mut rng));
    }
    let keys = ids.iter().map(|id| id.to_string().into_bytes());
    Some(Stream::from_parts(keys, records))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn probabilities_sum_to_one_and_decrease() {
        for &(n, alpha) in &[(1, 1.0), (10, 0.0), (1000, 0.5), (1000, 2.0)] {
            let p = zipf_probabilities(n, alpha);
            assert_eq!(p.len(), n as usize);
            let sum: f64 = p.iter().sum();
            assert!((sum - 1.0).abs() < 1e-9, "n={n} alpha={alpha} sum={sum}");
            assert!(p.windows(2).all(|w| w[0] >= w[1]));
        }
        // alpha = 0 is uniform.
        let p = zipf_probabilities(4, 0.0);
        assert!(p.iter().all(|&x| (x - 0.25).abs() < 1e-12));
        // alpha = 1, n = 2: p = (2/3, 1/3).
        let p = zipf_probabilities(2, 1.0);
        assert!((p[0] - 2.0 / 3.0).abs() < 1e-12 && (p[1] - 1.0 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn alias_table_rejects_bad_weights() {
        assert!(AliasTable::new(&[]).is_none());
        assert!(AliasTable::new(&[0.0, 0.0]).is_none());
        assert!(AliasTable::new(&[1.0, -1.0]).is_none());
        assert!(AliasTable::new(&[1.0, f64::NAN]).is_none());
        assert!(AliasTable::new(&[1.0, f64::INFINITY]).is_none());
        assert_eq!(AliasTable::new(&[3.0]).unwrap().len(), 1);
    }

    #[test]
    fn alias_table_never_draws_zero_weight() {
        let table = AliasTable::new(&[0.0, 5.0, 0.0, 1.0]).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        for _ in 0..100_000 {
            let x = table.sample(&mut rng);
            assert!(x == 1 || x == 3, "drew zero-weight outcome {x}");
        }
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
