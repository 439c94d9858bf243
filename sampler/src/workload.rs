//! The one synthetic workload: Zipf-distributed keys, shared by the lab's `simulate` (its streams),
//! `loadgen` (the records it produces) and so `demo` (which runs `loadgen`), and by the sidecar's
//! stationary simulation (`sidecar/stationary.rs`, a test). It lives here, beside the sidecar, so that
//! test and the lab (which depends on this library) share one generator.
//!
//! Key of rank `i` (1-based) has probability `p_i = i^-alpha / H(n, alpha)` (Zipf's law, as in the DKG
//! paper's evaluation). Records are drawn i.i.d. with Walker's alias method in Vose's numerically stable
//! form (M. D. Vose, "A linear algorithm for generating random numbers with a given distribution", IEEE
//! TSE 1991): O(n) set-up, O(1) per record, exact up to floating-point rounding.
//!
//! Ranks are mapped to key ids by a random permutation (per seed), and a key's bytes are the decimal
//! string of its id. Without the permutation the hot keys would be "0", "1", "2", ... and any result
//! would depend on how murmur2 happens to hash those particular strings. The permutation and then the
//! draws come from one ChaCha8 generator seeded with the seed, so a seed fixes the whole key sequence
//! (simulate's tests and its figures in BENCHMARKS.md depend on this exact stream).

use rand::Rng;
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;

/// Unnormalised Zipf weights `1 / i^alpha` for ranks `i = 1..=n`.
pub fn zipf_weights(n: u32, alpha: f64) -> Vec<f64> {
    (1..=n).map(|i| f64::from(i).powf(-alpha)).collect()
}

/// Normalised Zipf probabilities `p_i` for ranks `i = 1..=n` (index 0 is rank 1).
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

    /// Number of outcomes (never 0: [`AliasTable::new`] refuses an empty table).
    #[cfg(test)]
    fn len(&self) -> usize {
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

/// A seeded Zipf key sequence: a random permutation of the ids `0..n`, then i.i.d. draws of ranks.
#[derive(Clone, Debug)]
pub struct ZipfKeys {
    table: AliasTable,
    /// `ids[r]`: the id of the key of 0-based rank `r`.
    ids: Vec<u32>,
    rng: ChaCha8Rng,
}

impl ZipfKeys {
    /// `n` keys with exponent `alpha` (>= 0; 0 is uniform). `None` if `n` is 0 or the weights are
    /// unusable (`alpha` not finite).
    pub fn new(n: u32, alpha: f64, seed: u64) -> Option<Self> {
        let table = AliasTable::new(&zipf_weights(n, alpha))?;
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut ids: Vec<u32> = (0..n).collect();
        ids.shuffle(&mut rng);
        Some(Self { table, ids, rng })
    }

    /// The 0-based rank of the next record's key (0 is the most probable key).
    #[inline]
    pub fn next_rank(&mut self) -> u32 {
        self.table.sample(&mut self.rng)
    }

    /// The id of the next record's key (its bytes are the id in decimal).
    #[inline]
    pub fn next_id(&mut self) -> u32 {
        let rank = self.next_rank();
        self.ids[rank as usize]
    }

    /// The ids by rank: `ids()[r]` is the id of the key of 0-based rank `r`.
    pub fn ids(&self) -> &[u32] {
        &self.ids
    }
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

    #[test]
    fn keys_follow_the_seed_and_permute_every_id() {
        let mut a = ZipfKeys::new(1000, 1.0, 3).unwrap();
        let mut b = ZipfKeys::new(1000, 1.0, 3).unwrap();
        let draws: Vec<u32> = (0..1000).map(|_| a.next_id()).collect();
        assert_eq!(draws, (0..1000).map(|_| b.next_id()).collect::<Vec<_>>());
        let mut ids = a.ids().to_vec();
        ids.sort_unstable();
        assert_eq!(ids, (0..1000).collect::<Vec<u32>>());
        // next_id is the permuted id of next_rank.
        let mut c = ZipfKeys::new(1000, 1.0, 3).unwrap();
        let ranks: Vec<u32> = (0..1000).map(|_| c.next_rank()).collect();
        let via_rank: Vec<u32> = ranks.iter().map(|&r| c.ids()[r as usize]).collect();
        assert_eq!(via_rank, draws);
        assert!(ZipfKeys::new(0, 1.0, 3).is_none());
        assert!(ZipfKeys::new(10, f64::NAN, 3).is_none());
    }
}
