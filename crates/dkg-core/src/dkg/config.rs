//! The learning parameters ([`DkgConfig`]) and the project's defaults, each with why it has its value
//! and where it was measured; the paper's own values (DEBS 2015) for comparison.

use super::*;

/// Default heavy-hitter threshold numerator: `theta = DEFAULT_THETA_PER_PARTITION / k`.
///
/// Why `1/(4k)`: a key is worth pinning as soon as it is a sizeable fraction of one partition's fair share
/// (`1/k`); with the paper's fixed `theta = 0.1`, keys between `1/(4k)` and `0.1` are hashed into buckets and
/// can leave one partition tens of points above the others when `k >= 10` (see `paper-notes.md`). A quarter
/// of a fair share keeps the heavy list short (at most `4k` keys, `8k` SpaceSaving counters) while the buckets
/// only carry keys small enough for LPT to even out (a list schedule ends within one job of the mean).
///
/// Measured (`dkg-lab simulate`, BENCHMARKS.md "Balance (simulate)"): over alpha 0.5..2.0 x k 5..100,
/// n = 10^4..10^6, the rules `c / k` for c in {0.05, 0.1, 0.25, 0.5, 1} give the same gap to lpt-full
/// within seed noise once mu >= 32 (paired over 20 seeds at mu = 64, c = 0.1, 0.5, 1 differ from c = 0.25
/// by -0.004, +0.013, +0.006 points, all within 1.5 standard errors). So c is chosen for the worst case,
/// not the averages: 0.25 bounds a bucketed key at a quarter of a fair share at negligible cost.
pub const DEFAULT_THETA_PER_PARTITION: f64 = 0.25;

/// Upper cap of the default theta: `default_theta(k) <= DEFAULT_THETA_MAX` (the paper's value), so small
/// partition counts still pin every key above 10% of the stream.
pub const DEFAULT_THETA_MAX: f64 = 0.1;

/// Default buckets per partition (`mu`): `64 * k` buckets.
///
/// Why 64: LPT balances buckets well when each partition receives many of them (its makespan is within
/// one job of the mean), so the residual imbalance of the sparse keys shrinks roughly as `1/mu`; the
/// paper's `mu = 2` leaves 10-50 points of avoidable imbalance. A bucket costs one `u32` in the assignment
/// and one `u64` in the sketch, so 64 per partition is free for a Kafka producer (6400 entries at
/// `k = 100`).
///
/// Measured (`dkg-lab simulate`, BENCHMARKS.md "Balance (simulate)"), mean of dkg minus lpt-full over the
/// 30 cells alpha 0.5..2.0 x k 5..100, m = 10^6, theta = 0.25/k:
/// - learning on 10% of the stream, n = 10^4, 20 seeds: mu 16/24/32/64/128 -> 0.88/0.84/0.78/0.87/1.00 points;
///   n = 10^6: 32/64/128 -> 0.98/0.90/1.13. Gaps > 2 points remain only where no key exceeds 1/k and k >= 20:
///   there the learned loads carry binomial noise ~ sqrt(k / 10^5) per partition that no mapping can undo.
/// - learning the whole stream (the mapping alone): worst cell 4.3 (mu 8), 1.9 (16), 0.7 (32), 0.3 (64),
///   0.1 (128) points at n = 10^4; 2.0 (32), 1.0 (64), 0.4 (128) at n = 10^6.
///
/// 64 is the best compromise: a finer table helps the mapping, but with a short window it also leaves more
/// buckets empty (no evidence), and keys first seen after the window land in those. The numbers above were
/// taken while empty buckets were spread `bucket % k`; spreading them over the partitions at or below the
/// mean load instead (the current rule) gives, 3 seeds, learning on 10%: mean gap 0.71 points with mu = 64,
/// 0.75 with mu = 128, and dkg equal to the bound on every cell where the top key exceeds 1/k.
///
/// This is the default up to about 1,600 partitions; above, [`default_mu`] lowers it so the assignment
/// document still fits Kafka's default message limits.
pub const DEFAULT_MU: f64 = 64.0;

/// Lowest mu [`default_mu`] goes to for large partition counts.
///
/// Measured (`dkg-lab simulate`, BENCHMARKS.md "Scale: 1,000 and 10,000 partitions"), 10,000
/// partitions, 10^8 records over 10^8 distinct keys, learning on 10%: with Zipf 0.8, 1.0 and 1.2 the top
/// key exceeds 1/k and every mu gives the key-grouping bound; with Zipf 0.5 (no dominant key) lambda
/// is 9.1 / 13.5 / 17.1 / 23.3 % for mu 64 / 10 / 8 / 4 (lpt-full 0.0; learning the whole stream,
/// 0.8 % with mu 64 and 7.8 % with mu 10). Below 8 the loss grows quickly, so 8 is the floor; it is reached at about 11,000 partitions, beyond which default documents
/// outgrow [`DEFAULT_LIMITS_DOCUMENT_BYTES`] anyway (see [`default_mu`]).
pub const DEFAULT_MU_FLOOR: f64 = 8.0;

/// Share of [`DEFAULT_LIMITS_DOCUMENT_BYTES`] the default configuration may fill with the members whose
/// size it fixes (`table`, `predicted_load`, the header); the rest is left to the heavy-key list.
pub const DEFAULT_FIXED_DOCUMENT_SHARE: f64 = 0.75;

/// The default buckets per partition for a topic of `partitions` partitions (`k = 0` counts as 1):
/// [`DEFAULT_MU`], lowered for large `k` so the assignment document fits Kafka's default limits.
///
/// `min(DEFAULT_MU, floor(budget / (k * table_entry)))`, at least [`DEFAULT_MU_FLOOR`], where `budget`
/// is [`DEFAULT_FIXED_DOCUMENT_SHARE`] of [`DEFAULT_LIMITS_DOCUMENT_BYTES`] minus the `predicted_load`
/// and header text ([`DkgConfig::fixed_document_bytes_for`]) and `table_entry` the mean JSON bytes of
/// one table entry (its digits and a comma). That leaves a quarter of the limit (250 kB, about 4,000
/// heavy keys of 8 bytes) to the heavy list. 64 up to about 1,600 partitions; 32 at 3,000, 10 at
/// 10,000; [`DEFAULT_MU_FLOOR`] from about 11,000 partitions on, where default documents exceed the
/// default limits (they still fit a control topic created by this project, which allows 9 MiB). The
/// spec's compact table (`docs/spec.md` 4.6) and chunked documents (a design, its gap G6) would
/// remove the need for this rule.
#[must_use]
pub fn default_mu(partitions: u32) -> f64 {
    let k = partitions.max(1);
    let budget = DEFAULT_LIMITS_DOCUMENT_BYTES as f64 * DEFAULT_FIXED_DOCUMENT_SHARE
        - other_fixed_bytes(k) as f64;
    let fit = (budget / (f64::from(k) * table_entry_bytes(k))).floor();
    fit.clamp(DEFAULT_MU_FLOOR, DEFAULT_MU)
}

/// Mean JSON bytes of one `table` entry for `k` partitions: its decimal digits (the mean over the
/// partition numbers `0..k`, which LPT uses about equally often) and a comma.
fn table_entry_bytes(k: u32) -> f64 {
    let k = u64::from(k.max(1));
    // Partition numbers below 10 have 1 digit, below 100 2, ...
    let (mut digits, mut low, mut width) = (0u64, 0u64, 1u64);
    while low < k {
        let high = (low.max(1) * 10).min(k);
        digits += (high - low) * width;
        low = high;
        width += 1;
    }
    digits as f64 / k as f64 + 1.0
}

/// JSON bytes of everything but `table` and `heavy` in a document for `k` partitions: `predicted_load`
/// (at most 24 characters per share, as ryu writes a double in `[0, 1]`, and a comma) and 1 KiB for
/// the header members (topic name at most 249 bytes, numbers, member names).
fn other_fixed_bytes(k: u32) -> u64 {
    u64::from(k) * 25 + 1024
}

/// How much worse than a fresh LPT, as a share of the mean partition load, a migration-aware rebuild may be
/// in max load to keep jobs where they are.
///
/// A fresh LPT over thousands of small buckets packs every partition to within a fraction of a percent of
/// the mean, while the window's own sampling noise is larger (about `1 / sqrt(records per partition)`):
/// matching the fresh makespan exactly made a stationary re-learn move ~75% of the load (12 partitions,
/// Zipf 0.8, 2 x 10^5-record windows) for no measurable gain. With 2% it moves almost nothing (test
/// `rebuilding_on_a_fresh_sample_of_the_same_distribution_moves_little`).
pub const DEFAULT_MIGRATION_SLACK: f64 = 0.02;

/// The paper's theta (DEBS 2015 evaluation, also the authors' default).
pub const PAPER_THETA: f64 = 0.1;

/// The paper's mu.
pub const PAPER_MU: f64 = 2.0;

/// The project's default heavy-hitter threshold for `partitions` partitions:
/// `min(DEFAULT_THETA_PER_PARTITION / k, DEFAULT_THETA_MAX)` (`k = 0` counts as 1).
#[must_use]
pub fn default_theta(partitions: u32) -> f64 {
    (DEFAULT_THETA_PER_PARTITION / f64::from(partitions.max(1))).min(DEFAULT_THETA_MAX)
}

/// DKG learning parameters. Build one with [`DkgConfig::builder`], [`DkgConfig::default`] (the project's
/// defaults) or [`DkgConfig::paper`].
///
/// Serde: every field is optional on input (missing = default); unknown fields are rejected.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DkgConfig {
    /// Heavy-hitter threshold as a share of the window, in `(0, 1]`. `None` = [`default_theta`]`(k)`.
    pub theta: Option<f64>,
    /// SpaceSaving error bound as a share of the window, in `(0, 1]`. `None` = `theta / 2`.
    pub epsilon: Option<f64>,
    /// Buckets per partition (`ceil(mu * k)` buckets), finite and `> 0`. `None` = [`default_mu`]`(k)`.
    pub mu: Option<f64>,
    /// The hash mapping keys to buckets. Default `BucketHash::default()` (murmur2, `DEFAULT_BUCKET_SEED`).
    pub bucket_hash: BucketHash,
    /// Which heavy keys may be split over several partitions ([`SplitKeys`]).
    #[serde(skip_serializing_if = "SplitKeys::is_off")]
    pub split: SplitKeys,
}

impl Default for DkgConfig {
    /// theta = [`default_theta`]`(k)`, epsilon = theta / 2, mu = [`default_mu`]`(k)`, default bucket hash.
    ///
    /// Both rules depend on the partition count `k`. theta is a quarter of a fair share `1/k`, capped at
    /// 0.1 ([`DEFAULT_THETA_PER_PARTITION`]). mu is [`DEFAULT_MU`] = 64 buckets per partition up to
    /// about 1,600 partitions; above, it falls with `k` so that the assignment's table and
    /// `predicted_load` fill at most [`DEFAULT_FIXED_DOCUMENT_SHARE`] of Kafka's default message limits
    /// ([`DEFAULT_LIMITS_DOCUMENT_BYTES`]), down to [`DEFAULT_MU_FLOOR`] (10 at 10,000 partitions: a
    /// 100,000-entry table, about 490 kB of JSON). An explicit mu
    /// ([`DkgConfigBuilder::mu`]) always wins; [`DkgConfig::validate_for`] rejects one whose document
    /// could not be published at all, and [`DkgConfig::fits_default_limits`] tells whether it fits a
    /// control topic with the broker's default `max.message.bytes`. Splitting is off.
    fn default() -> Self {
        Self {
            theta: None,
            epsilon: None,
            mu: None,
            bucket_hash: BucketHash::default(),
            split: SplitKeys::Off,
        }
    }
}

/// Builder for [`DkgConfig`]; unset fields keep the defaults of [`DkgConfig::default`].
#[derive(Clone, Debug, Default)]
pub struct DkgConfigBuilder {
    config: DkgConfig,
}

impl DkgConfigBuilder {
    /// Heavy-hitter threshold, in `(0, 1]` (default: [`default_theta`] of the partition count).
    #[must_use]
    pub fn theta(mut self, theta: f64) -> Self {
        self.config.theta = Some(theta);
        self
    }

    /// SpaceSaving error bound, in `(0, 1]` (default: theta / 2).
    #[must_use]
    pub fn epsilon(mut self, epsilon: f64) -> Self {
        self.config.epsilon = Some(epsilon);
        self
    }

    /// Buckets per partition, finite and `> 0` (default: [`default_mu`] of the partition count).
    #[must_use]
    pub fn mu(mut self, mu: f64) -> Self {
        self.config.mu = Some(mu);
        self
    }

    /// The bucket hash (default `BucketHash::default()`).
    #[must_use]
    pub fn bucket_hash(mut self, bucket_hash: BucketHash) -> Self {
        self.config.bucket_hash = bucket_hash;
        self
    }

    /// Which heavy keys may be split (see [`SplitKeys`]).
    #[must_use]
    pub fn split(mut self, split: SplitKeys) -> Self {
        self.config.split = split;
        self
    }

    /// Validate and return the configuration.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the first field out of range.
    pub fn build(self) -> Result<DkgConfig> {
        self.config.validate()?;
        Ok(self.config)
    }
}

fn check_share(field: &'static str, x: f64) -> Result<()> {
    if x > 0.0 && x <= 1.0 {
        Ok(())
    } else {
        Err(Error::InvalidConfig {
            field,
            reason: format!("must be in (0, 1], got {x}"),
        })
    }
}

impl DkgConfig {
    /// A builder starting from the defaults.
    #[must_use]
    pub fn builder() -> DkgConfigBuilder {
        DkgConfigBuilder::default()
    }

    /// The paper's parameters: theta = 0.1, epsilon = theta / 2, mu = 2, default bucket hash.
    #[must_use]
    pub fn paper() -> Self {
        Self {
            theta: Some(PAPER_THETA),
            epsilon: None,
            mu: Some(PAPER_MU),
            bucket_hash: BucketHash::default(),
            split: SplitKeys::Off,
        }
    }

    /// Check the ranges that do not depend on the partition count.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the first field out of range.
    pub fn validate(&self) -> Result<()> {
        if let Some(theta) = self.theta {
            check_share("theta", theta)?;
        }
        if let Some(epsilon) = self.epsilon {
            check_share("epsilon", epsilon)?;
        }
        if let Some(mu) = self.mu
            && !(mu.is_finite() && mu > 0.0)
        {
            return Err(Error::InvalidConfig {
                field: "mu",
                reason: format!("must be finite and > 0, got {mu}"),
            });
        }
        Ok(())
    }

    /// Check everything for a topic of `partitions` partitions: ranges, partition count, bucket count and
    /// summary size limits.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the offending field.
    pub fn validate_for(&self, partitions: u32) -> Result<()> {
        self.validate()?;
        if partitions == 0 || partitions > MAX_PARTITIONS {
            return Err(Error::InvalidConfig {
                field: "partitions",
                reason: format!("must be in 1..={MAX_PARTITIONS}, got {partitions}"),
            });
        }
        let mu = self.mu_for(partitions);
        let buckets = mu * f64::from(partitions);
        if buckets.ceil() > f64::from(MAX_BUCKETS) {
            return Err(Error::InvalidConfig {
                field: "mu",
                reason: format!(
                    "mu {mu} x {partitions} partitions needs {} buckets, more than the maximum {MAX_BUCKETS}",
                    buckets.ceil()
                ),
            });
        }
        let fixed = self.fixed_document_bytes_for(partitions);
        if fixed > MAX_ASSIGNMENT_BYTES as u64 {
            let room = MAX_ASSIGNMENT_BYTES as f64 - other_fixed_bytes(partitions) as f64;
            let largest = (room / (f64::from(partitions) * table_entry_bytes(partitions))).floor();
            return Err(Error::InvalidConfig {
                field: "mu",
                reason: format!(
                    "mu {mu} x {partitions} partitions makes assignment documents of at least {fixed} \
                     bytes, over the {MAX_ASSIGNMENT_BYTES}-byte limit every reader enforces: they could \
                     never be published; use mu <= {largest}"
                ),
            });
        }
        let epsilon = self.epsilon_for(partitions);
        if (1.0 / epsilon).ceil() > MAX_CAPACITY as f64 {
            return Err(Error::InvalidConfig {
                field: "epsilon",
                reason: format!("{epsilon} needs more than {MAX_CAPACITY} counters"),
            });
        }
        Ok(())
    }

    /// The heavy-hitter threshold for `partitions` partitions.
    #[must_use]
    pub fn theta_for(&self, partitions: u32) -> f64 {
        self.theta.unwrap_or_else(|| default_theta(partitions))
    }

    /// The SpaceSaving error bound for `partitions` partitions (theta / 2 unless set).
    #[must_use]
    pub fn epsilon_for(&self, partitions: u32) -> f64 {
        self.epsilon
            .unwrap_or_else(|| self.theta_for(partitions) / 2.0)
    }

    /// Buckets per partition for `partitions` partitions: the explicit mu, else [`default_mu`].
    #[must_use]
    pub fn mu_for(&self, partitions: u32) -> f64 {
        self.mu.unwrap_or_else(|| default_mu(partitions))
    }

    /// The bucket count `ceil(mu * k)`, at least 1 (saturating at `u32::MAX` for absurd values).
    #[must_use]
    pub fn buckets_for(&self, partitions: u32) -> u32 {
        // `as` saturates (and maps NaN to 0).
        ((self.mu_for(partitions) * f64::from(partitions)).ceil() as u32).max(1)
    }

    /// Estimated JSON bytes of the members of an assignment document this configuration fixes for
    /// `partitions` partitions: the `table` (mean digits per entry), `predicted_load` (its longest form,
    /// 24 characters per share) and the header. Every document built with it is at most about this
    /// long plus its heavy-key list (about 60 bytes per 8-byte key); shorter when the shares print
    /// short (`0.0001`).
    #[must_use]
    pub fn fixed_document_bytes_for(&self, partitions: u32) -> u64 {
        let table = f64::from(self.buckets_for(partitions)) * table_entry_bytes(partitions);
        table.ceil() as u64 + other_fixed_bytes(partitions)
    }

    /// Whether documents for `partitions` partitions leave at least a quarter of
    /// [`DEFAULT_LIMITS_DOCUMENT_BYTES`] to the heavy keys, so that they fit a control topic with Kafka's
    /// default `max.message.bytes` (true for the default mu up to about 11,000 partitions). A publisher
    /// should warn at startup when this is false: only a control topic created with a larger
    /// `max.message.bytes` (as this project's client does) accepts such documents.
    #[must_use]
    pub fn fits_default_limits(&self, partitions: u32) -> bool {
        self.fixed_document_bytes_for(partitions) as f64
            <= DEFAULT_LIMITS_DOCUMENT_BYTES as f64 * DEFAULT_FIXED_DOCUMENT_SHARE
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn defaults() {
        assert_eq!(default_theta(0), 0.1);
        assert_eq!(default_theta(1), 0.1);
        assert_eq!(default_theta(2), 0.1);
        assert_eq!(default_theta(3), 0.25 / 3.0);
        assert_eq!(default_theta(100), 0.0025);
        let c = DkgConfig::default();
        assert_eq!(c.theta_for(100), 0.0025);
        assert_eq!(c.epsilon_for(100), 0.00125);
        assert_eq!(c.buckets_for(100), 6400);
        let p = DkgConfig::paper();
        assert_eq!(
            (p.theta_for(10), p.epsilon_for(10), p.buckets_for(10)),
            (0.1, 0.05, 20)
        );
        assert_eq!(
            DkgConfig::builder().mu(2.5).build().unwrap().buckets_for(3),
            8
        );
        assert_eq!(
            DkgConfig::builder()
                .epsilon(0.2)
                .build()
                .unwrap()
                .epsilon_for(10),
            0.2
        );
        let s = Sketch::new(&DkgConfig::default(), 10).unwrap();
        assert_eq!(s.summary().capacity(), 80); // theta 1/40, eps 1/80
        assert_eq!(s.buckets(), 640);
    }

    #[test]
    fn default_mu_falls_with_the_partition_count_down_to_the_floor() {
        assert_eq!(table_entry_bytes(1), 2.0);
        assert_eq!(table_entry_bytes(10), 2.0);
        assert_eq!(table_entry_bytes(11), (10.0 + 2.0) / 11.0 + 1.0);
        assert_eq!(
            table_entry_bytes(1000),
            (10.0 + 180.0 + 2700.0) / 1000.0 + 1.0
        );
        for k in [1, 12, 100, 1000, 1600] {
            assert_eq!(default_mu(k), DEFAULT_MU, "k = {k}");
        }
        assert_eq!(default_mu(0), DEFAULT_MU);
        assert_eq!(default_mu(10_000), 10.0);
        assert_eq!(default_mu(50_000), DEFAULT_MU_FLOOR);
        let mut last = DEFAULT_MU;
        for k in (1..=30_000).step_by(97) {
            let mu = default_mu(k);
            assert!(
                mu <= last && mu >= DEFAULT_MU_FLOOR,
                "k = {k}: {mu} after {last}"
            );
            assert_eq!(mu, mu.floor(), "an integer");
            last = mu;
        }
        // The default fits while the floor is not reached, explicit mu wins, the paper stays at 2.
        let c = DkgConfig::default();
        assert_eq!(c.buckets_for(10_000), 100_000);
        assert!(c.fits_default_limits(10_000));
        assert!(!c.fits_default_limits(20_000));
        let explicit = DkgConfig::builder().mu(64.0).build().unwrap();
        assert_eq!(explicit.buckets_for(10_000), 640_000);
        assert!(!explicit.fits_default_limits(10_000));
        assert!(explicit.fits_default_limits(1000));
        assert_eq!(DkgConfig::paper().buckets_for(10_000), 20_000);
        assert_eq!(Sketch::new(&c, 10_000).unwrap().mu(), 10.0);
    }

    #[test]
    fn an_explicit_mu_whose_documents_exceed_the_reader_limit_is_rejected() {
        // 64 x 10,000: about 3.2 MB of table, publishable to a 9 MiB control topic.
        let mu64 = DkgConfig::builder().mu(64.0).build().unwrap();
        let fixed = mu64.fixed_document_bytes_for(10_000);
        assert!((3_000_000..3_500_000).contains(&fixed), "{fixed}");
        assert!(mu64.validate_for(10_000).is_ok());
        // 64 x 25,000: 1.6 M entries of 5.6 bytes on average, over 8 MiB.
        match mu64.validate_for(25_000) {
            Err(Error::InvalidConfig {
                field: "mu",
                reason,
            }) => {
                assert!(reason.contains("never be published"), "{reason}");
                assert!(reason.contains("use mu <= 55"), "{reason}");
            }
            other => panic!("expected a mu error, got {other:?}"),
        }
        assert!(Sketch::new(&mu64, 25_000).is_err());
        assert!(DkgConfig::default().validate_for(25_000).is_ok());
    }

    #[test]
    fn config_validation() {
        for (b, field) in [
            (DkgConfig::builder().theta(0.0), "theta"),
            (DkgConfig::builder().theta(1.5), "theta"),
            (DkgConfig::builder().theta(f64::NAN), "theta"),
            (DkgConfig::builder().epsilon(-0.1), "epsilon"),
            (DkgConfig::builder().mu(0.0), "mu"),
            (DkgConfig::builder().mu(f64::INFINITY), "mu"),
        ] {
            assert!(matches!(b.build(), Err(Error::InvalidConfig { field: f, .. }) if f == field));
        }
        let c = DkgConfig::default();
        assert!(matches!(
            Sketch::new(&c, 0),
            Err(Error::InvalidConfig {
                field: "partitions",
                ..
            })
        ));
        let huge_mu = DkgConfig::builder().mu(1e6).build().unwrap();
        assert!(matches!(
            Sketch::new(&huge_mu, 100),
            Err(Error::InvalidConfig { field: "mu", .. })
        ));
        let tiny_eps = DkgConfig::builder().epsilon(1e-12).build().unwrap();
        assert!(matches!(
            Sketch::new(&tiny_eps, 10),
            Err(Error::InvalidConfig {
                field: "epsilon",
                ..
            })
        ));
    }
}
