//! When does a new assignment pay off? The publish decision of `dkg-sampler run`, kept pure for testing.
//!
//! Every interval the sampler builds a fresh, migration-aware assignment from the window (DKG, Rivetti et
//! al. DEBS 2015, with `lpt_sticky` seeded by the current assignment) and compares predicted load
//! imbalances on that same window (lambda = max/mean - 1, the paper's metric). It publishes
//! - when there is no assignment yet, or the current one was made for another partition count or another
//!   sketch shape (bucket count / hash), so its prediction is impossible;
//! - otherwise only when BOTH the current assignment's predicted imbalance exceeds `imbalance_threshold`
//!   AND the fresh one improves on it by more than the effective margin.
//!
//! The effective margin is `max(improvement_margin, z * sqrt(k / n))`: `sqrt(k / n)` is the standard
//! deviation of one partition's load relative to the mean when `n` sampled records fall on `k` partitions,
//! and the fresh assignment is scored on the very data it was fitted to, so differences below a few such
//! deviations are sampling noise, not drift. Without this floor a low-rate topic (few records per window)
//! would churn epochs on a perfectly stable distribution; with it, hysteresis holds at any rate and the
//! configured margin is what matters for busy topics. `min_samples` keeps the sampler from deciding
//! anything on an (almost) empty window.

use std::fmt;

/// Thresholds of the decision (all imbalances are ratios: 0.10 = 10 points).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Policy {
    /// Republish only when the current assignment's predicted imbalance exceeds this.
    pub imbalance_threshold: f64,
    /// ... and the fresh assignment lowers it by more than this.
    pub improvement_margin: f64,
    /// Sampled records the window must hold before any decision.
    pub min_samples: u64,
    /// How many noise standard deviations an improvement must exceed.
    pub noise_z: f64,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            imbalance_threshold: 0.10,
            improvement_margin: 0.05,
            min_samples: 1000,
            noise_z: 3.0,
        }
    }
}

/// What is known about the currently published assignment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Current {
    /// Nothing published for the topic (or retracted).
    None,
    /// Made for another partition count.
    OtherPartitionCount {
        /// Its partition count.
        partitions: u32,
    },
    /// Same partition count but a sketch shape this sampler cannot predict it with (other bucket count or
    /// hash: another sampler configuration published it).
    Unpredictable,
    /// Predicted on the window.
    Predicted {
        /// Its predicted imbalance on the window.
        imbalance: f64,
    },
}

/// The inputs of one decision.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Situation {
    /// The topic's current partition count.
    pub partitions: u32,
    /// Effective number of sampled records in the window.
    pub window_samples: f64,
    /// The current assignment.
    pub current: Current,
    /// Predicted imbalance of the fresh assignment on the window.
    pub fresh_imbalance: f64,
    /// Publish whatever the hysteresis says (`--once`), given enough data.
    pub force: bool,
}

/// Why a fresh assignment is published.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PublishReason {
    /// There is none yet.
    NoAssignment,
    /// The topic's partition count changed.
    PartitionCountChanged {
        /// The current assignment's partition count.
        from: u32,
        /// The topic's.
        to: u32,
    },
    /// The current assignment cannot be evaluated with this sampler's sketch.
    Unpredictable,
    /// Imbalanced, and the fresh assignment is clearly better.
    Imbalanced {
        /// Current predicted imbalance.
        current: f64,
        /// Fresh predicted imbalance.
        fresh: f64,
    },
    /// `--once`.
    Forced,
}

/// Why nothing is published.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum KeepReason {
    /// Not enough data in the window.
    TooFewSamples {
        /// Sampled records in the window.
        have: f64,
        /// Required.
        need: u64,
    },
    /// The current assignment is within the threshold.
    Balanced {
        /// Its predicted imbalance.
        current: f64,
    },
    /// The fresh assignment is not better by more than the effective margin.
    NoImprovement {
        /// Current predicted imbalance.
        current: f64,
        /// Fresh predicted imbalance.
        fresh: f64,
        /// The effective margin it had to beat.
        margin: f64,
    },
}

/// The outcome.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Decision {
    /// Publish the fresh assignment.
    Publish(PublishReason),
    /// Keep the current one.
    Keep(KeepReason),
}

impl Decision {
    /// Whether to publish.
    #[cfg(test)]
    pub fn publishes(&self) -> bool {
        matches!(self, Decision::Publish(_))
    }
}

/// `z * sqrt(k / n)`: the imbalance difference that sampling noise alone produces (0 when `n` is 0 so that
/// `min_samples` is what guards empty windows). `n` counts records also with `--weight bytes`: the noise
/// comes from how many records were drawn, and counting their bytes would shrink the floor by the record
/// size while size variance only adds noise.
pub fn noise_floor(z: f64, partitions: u32, samples: f64) -> f64 {
    if samples <= 0.0 || partitions == 0 {
        return 0.0;
    }
    z * (f64::from(partitions) / samples).sqrt()
}

/// Decide whether to publish the fresh assignment.
pub fn decide(policy: &Policy, s: &Situation) -> Decision {
    if s.window_samples < policy.min_samples as f64 || s.window_samples <= 0.0 {
        return Decision::Keep(KeepReason::TooFewSamples {
            have: s.window_samples,
            need: policy.min_samples,
        });
    }
    let current = match s.current {
        Current::None => return Decision::Publish(PublishReason::NoAssignment),
        Current::OtherPartitionCount { partitions } => {
            return Decision::Publish(PublishReason::PartitionCountChanged {
                from: partitions,
                to: s.partitions,
            });
        }
        Current::Unpredictable => return Decision::Publish(PublishReason::Unpredictable),
        Current::Predicted { imbalance } => imbalance,
    };
    if s.force {
        return Decision::Publish(PublishReason::Forced);
    }
    if current <= policy.imbalance_threshold {
        return Decision::Keep(KeepReason::Balanced { current });
    }
    let margin =
        policy
            .improvement_margin
            .max(noise_floor(policy.noise_z, s.partitions, s.window_samples));
    if current - s.fresh_imbalance > margin {
        Decision::Publish(PublishReason::Imbalanced {
            current,
            fresh: s.fresh_imbalance,
        })
    } else {
        Decision::Keep(KeepReason::NoImprovement {
            current,
            fresh: s.fresh_imbalance,
            margin,
        })
    }
}

fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

impl fmt::Display for PublishReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PublishReason::NoAssignment => write!(f, "no assignment published yet"),
            PublishReason::PartitionCountChanged { from, to } => {
                write!(f, "partition count changed from {from} to {to}")
            }
            PublishReason::Unpredictable => {
                write!(
                    f,
                    "the current assignment has another bucket layout than this sampler's"
                )
            }
            PublishReason::Imbalanced { current, fresh } => write!(
                f,
                "current assignment predicts {} imbalance, a fresh one {}",
                pct(*current),
                pct(*fresh)
            ),
            PublishReason::Forced => write!(f, "--once"),
        }
    }
}

impl fmt::Display for KeepReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeepReason::TooFewSamples { have, need } => {
                write!(f, "window holds {have:.0} sampled records, need {need}")
            }
            KeepReason::Balanced { current } => {
                write!(
                    f,
                    "current assignment predicts {} imbalance, within threshold",
                    pct(*current)
                )
            }
            KeepReason::NoImprovement {
                current,
                fresh,
                margin,
            } => write!(
                f,
                "fresh assignment ({}) does not beat the current one ({}) by more than {}",
                pct(*fresh),
                pct(*current),
                pct(*margin)
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MANY: f64 = 1e9; // noise floor negligible

    fn situation(current: Current, fresh: f64, samples: f64, force: bool) -> Situation {
        Situation {
            partitions: 12,
            window_samples: samples,
            current,
            fresh_imbalance: fresh,
            force,
        }
    }

    #[test]
    fn decision_table() {
        use Current::*;
        let p = Policy::default(); // threshold 0.10, margin 0.05, min 1000, z 3
        struct Row {
            name: &'static str,
            current: Current,
            fresh: f64,
            samples: f64,
            force: bool,
            publish: bool,
        }
        let rows = [
            Row {
                name: "empty window",
                current: None,
                fresh: 0.0,
                samples: 0.0,
                force: false,
                publish: false,
            },
            Row {
                name: "too few samples",
                current: None,
                fresh: 0.0,
                samples: 999.0,
                force: false,
                publish: false,
            },
            Row {
                name: "too few samples, forced",
                current: None,
                fresh: 0.0,
                samples: 10.0,
                force: true,
                publish: false,
            },
            Row {
                name: "first assignment",
                current: None,
                fresh: 0.5,
                samples: MANY,
                force: false,
                publish: true,
            },
            Row {
                name: "partition count changed",
                current: OtherPartitionCount { partitions: 6 },
                fresh: 0.3,
                samples: MANY,
                force: false,
                publish: true,
            },
            Row {
                name: "other layout",
                current: Unpredictable,
                fresh: 0.3,
                samples: MANY,
                force: false,
                publish: true,
            },
            Row {
                name: "balanced",
                current: Predicted { imbalance: 0.08 },
                fresh: 0.0,
                samples: MANY,
                force: false,
                publish: false,
            },
            Row {
                name: "at threshold",
                current: Predicted { imbalance: 0.10 },
                fresh: 0.0,
                samples: MANY,
                force: false,
                publish: false,
            },
            Row {
                name: "imbalanced, clear gain",
                current: Predicted { imbalance: 0.80 },
                fresh: 0.05,
                samples: MANY,
                force: false,
                publish: true,
            },
            Row {
                name: "imbalanced, gain below margin",
                current: Predicted { imbalance: 1.52 },
                fresh: 1.49,
                samples: MANY,
                force: false,
                publish: false,
            },
            Row {
                name: "imbalanced, gain equals margin",
                current: Predicted { imbalance: 0.30 },
                fresh: 0.25,
                samples: MANY,
                force: false,
                publish: false,
            },
            Row {
                name: "imbalanced, gain just above margin",
                current: Predicted { imbalance: 0.30 },
                fresh: 0.2499,
                samples: MANY,
                force: false,
                publish: true,
            },
            Row {
                name: "fresh worse",
                current: Predicted { imbalance: 0.30 },
                fresh: 0.40,
                samples: MANY,
                force: false,
                publish: false,
            },
            // noise floor: 3 * sqrt(12 / 2000) = 0.232 > margin
            Row {
                name: "noisy window hides a 20-point gain",
                current: Predicted { imbalance: 0.40 },
                fresh: 0.20,
                samples: 2000.0,
                force: false,
                publish: false,
            },
            Row {
                name: "noisy window, 30-point gain",
                current: Predicted { imbalance: 0.50 },
                fresh: 0.20,
                samples: 2000.0,
                force: false,
                publish: true,
            },
            Row {
                name: "forced while balanced",
                current: Predicted { imbalance: 0.01 },
                fresh: 0.01,
                samples: MANY,
                force: true,
                publish: true,
            },
        ];
        for r in rows {
            let d = decide(&p, &situation(r.current, r.fresh, r.samples, r.force));
            assert_eq!(d.publishes(), r.publish, "{}: {d:?}", r.name);
        }
    }

    #[test]
    fn reasons_carry_the_numbers() {
        let p = Policy::default();
        let d = decide(
            &p,
            &situation(Current::Predicted { imbalance: 0.8 }, 0.1, MANY, false),
        );
        assert_eq!(
            d,
            Decision::Publish(PublishReason::Imbalanced {
                current: 0.8,
                fresh: 0.1
            })
        );
        let d = decide(
            &p,
            &situation(
                Current::OtherPartitionCount { partitions: 6 },
                0.1,
                MANY,
                false,
            ),
        );
        assert_eq!(
            d,
            Decision::Publish(PublishReason::PartitionCountChanged { from: 6, to: 12 })
        );
        let d = decide(
            &p,
            &situation(Current::Predicted { imbalance: 0.4 }, 0.2, 2000.0, false),
        );
        match d {
            Decision::Keep(KeepReason::NoImprovement { margin, .. }) => {
                assert!((margin - 3.0 * (12.0f64 / 2000.0).sqrt()).abs() < 1e-12)
            }
            other => panic!("{other:?}"),
        }
        match d {
            Decision::Keep(reason) => assert!(reason.to_string().contains("does not beat")),
            Decision::Publish(reason) => panic!("{reason}"),
        }
    }

    #[test]
    fn stricter_policies_publish_less() {
        let lenient = Policy {
            imbalance_threshold: 0.0,
            improvement_margin: 0.0,
            min_samples: 0,
            noise_z: 0.0,
        };
        let strict = Policy {
            imbalance_threshold: 0.5,
            improvement_margin: 0.2,
            ..Policy::default()
        };
        let s = situation(Current::Predicted { imbalance: 0.3 }, 0.2, MANY, false);
        assert!(decide(&lenient, &s).publishes());
        assert!(!decide(&strict, &s).publishes());
    }

    #[test]
    fn noise_floor_shrinks_with_samples() {
        assert_eq!(noise_floor(3.0, 12, 0.0), 0.0);
        let small = noise_floor(3.0, 12, 1e3);
        let big = noise_floor(3.0, 12, 1e6);
        assert!(small > big && big > 0.0);
        assert!((noise_floor(3.0, 12, 1.2e5) - 0.03).abs() < 1e-12);
    }
}
