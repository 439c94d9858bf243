//! Per-key record sizes for `simulate --value-bytes`: every key gets one value size, drawn i.i.d. from
//! the given distribution and independently of the key's rank, so the keys heavy in bytes are in general
//! not the keys heavy in records (a few large-record keys among many small-record ones). A record's size
//! is its key's bytes plus its key's value size, what `dkg-sampler run --weight bytes` counts (no
//! headers in a simulated stream).
//!
//! The log-normal draws use the Box-Muller transform (Box and Muller, "A Note on the Generation of
//! Random Normal Deviates", Ann. Math. Statist. 1958) on a ChaCha8 generator, so a seed fixes every size.

use std::fmt;
use std::str::FromStr;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Largest value size drawn (1 GiB): a log-normal tail must not overflow the byte totals.
const MAX_VALUE_BYTES: f64 = (1u64 << 30) as f64;

/// Mixed into the stream seed so that the sizes do not reuse the key draws' random numbers.
const SIZE_SEED_SALT: u64 = 0x5157_e5b7_7e5a_11ce;

/// The distribution of the per-key value sizes (`--value-bytes`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ValueBytes {
    /// Every key's values have `N` bytes (`fixed:N`): bytes then balance like records.
    Fixed(u64),
    /// `exp(N(mu, sigma^2))` bytes, rounded, at least 1 (`lognormal:MU,SIGMA`): median `e^mu`.
    LogNormal {
        /// Mean of the logarithm.
        mu: f64,
        /// Standard deviation of the logarithm.
        sigma: f64,
    },
}

impl FromStr for ValueBytes {
    type Err = String;

    /// `fixed:N` or `lognormal:MU,SIGMA`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        let number = |x: &str| -> Result<f64, String> {
            x.trim()
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .ok_or_else(|| format!("{x:?} is not a number in --value-bytes {s:?}"))
        };
        if let Some(n) = s.strip_prefix("fixed:") {
            let n: u64 = n
                .trim()
                .parse()
                .map_err(|_| format!("fixed:N needs a byte count, got {s:?}"))?;
            if !(1..=MAX_VALUE_BYTES as u64).contains(&n) {
                return Err(format!("fixed:N must be in 1..=2^30 bytes, got {n}"));
            }
            return Ok(Self::Fixed(n));
        }
        if let Some(params) = s.strip_prefix("lognormal:") {
            let (mu, sigma) = params
                .split_once(',')
                .ok_or_else(|| format!("lognormal needs MU,SIGMA, got {s:?}"))?;
            let (mu, sigma) = (number(mu)?, number(sigma)?);
            if !(0.0..=20.0).contains(&mu) || !(0.0..=5.0).contains(&sigma) {
                return Err(format!(
                    "lognormal:MU,SIGMA needs MU in [0, 20] (median e^MU bytes) and SIGMA in [0, 5], \
                     got {mu},{sigma}"
                ));
            }
            return Ok(Self::LogNormal { mu, sigma });
        }
        Err(format!(
            "expected fixed:N or lognormal:MU,SIGMA (e.g. lognormal:6,1.5), got {s:?}"
        ))
    }
}

impl fmt::Display for ValueBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Fixed(n) => write!(f, "fixed:{n}"),
            Self::LogNormal { mu, sigma } => write!(f, "lognormal:{mu},{sigma}"),
        }
    }
}

impl ValueBytes {
    /// One value size per key, for `keys` keys, as a pure function of `seed`.
    pub fn draw(self, keys: usize, seed: u64) -> Vec<u64> {
        match self {
            Self::Fixed(n) => vec![n; keys],
            Self::LogNormal { mu, sigma } => {
                let mut rng = ChaCha8Rng::seed_from_u64(seed ^ SIZE_SEED_SALT);
                (0..keys)
                    .map(|_| {
                        // Box-Muller: u1 in (0, 1] keeps ln(u1) finite.
                        let u1 = 1.0 - rng.random::<f64>();
                        let u2 = rng.random::<f64>();
                        let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
                        (mu + sigma * z).exp().round().clamp(1.0, MAX_VALUE_BYTES) as u64
                    })
                    .collect()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn specs_parse_and_print() {
        assert_eq!("fixed:100".parse(), Ok(ValueBytes::Fixed(100)));
        assert_eq!(
            " lognormal:6, 1.5".parse(),
            Ok(ValueBytes::LogNormal {
                mu: 6.0,
                sigma: 1.5
            })
        );
        assert_eq!(ValueBytes::Fixed(7).to_string(), "fixed:7");
        for bad in [
            "",
            "100",
            "fixed:0",
            "fixed:-1",
            "fixed:x",
            "lognormal:6",
            "lognormal:6,x",
            "lognormal:-1,1",
            "lognormal:6,9",
            "lognormal:NaN,1",
            "pareto:1",
        ] {
            assert!(bad.parse::<ValueBytes>().is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn lognormal_sizes_are_reproducible_with_the_right_median_and_spread() {
        let spec = ValueBytes::LogNormal {
            mu: 6.0,
            sigma: 1.0,
        };
        let a = spec.draw(20_000, 3);
        assert_eq!(a, spec.draw(20_000, 3));
        assert_ne!(a, spec.draw(20_000, 4));
        let mut logs: Vec<f64> = a.iter().map(|&s| (s as f64).ln()).collect();
        logs.sort_by(f64::total_cmp);
        let median = logs[logs.len() / 2];
        let mean = logs.iter().sum::<f64>() / logs.len() as f64;
        let sd = (logs.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / logs.len() as f64).sqrt();
        // Standard errors at 20,000 draws are about 0.01; rounding to whole bytes shifts little at e^6.
        assert!((median - 6.0).abs() < 0.05, "median of ln {median}");
        assert!((sd - 1.0).abs() < 0.05, "sd of ln {sd}");
        assert!(a.iter().all(|&s| s >= 1));
        assert_eq!(ValueBytes::Fixed(9).draw(3, 1), vec![9, 9, 9]);
    }
}
