//! Split placement (issue 15, item 1, `DkgConfig::split`): parts on distinct partitions, only keys
//! over the threshold, never more parts than partitions, weights in proportion, sticky parts; and
//! with splitting off, builds are byte for byte what they were before splitting existed (the golden
//! file was written by the code of commit c01087a).

use std::collections::HashSet;

use dkg_kafka_core::{
    Assignment, DEFAULT_SPLIT_SLACK, DkgConfig, MAX_SPLIT_PARTS, MAX_SPLIT_WEIGHT_SUM, Sketch,
    SplitKeys, split_parts, split_weights,
};
use proptest::prelude::*;

/// A skewed window: "hot" 30% of the records, 1,500 keys with a skewed rest.
fn window(config: &DkgConfig, salt: u32) -> Sketch {
    let mut s = Sketch::new(config, 12).expect("valid config");
    for i in 0..20_000u32 {
        if i % 10 < 3 {
            s.observe(b"hot");
        } else {
            let x = i.wrapping_mul(2_654_435_761).wrapping_add(salt) % 1500;
            // Squaring skews the rest towards low ids.
            let key = format!("key-{}", (x * x) / 1500);
            s.observe(key.as_bytes());
        }
    }
    s
}

fn builds(config: &DkgConfig) -> (Assignment, Assignment) {
    let first = window(config, 0)
        .build("orders", 1, 7, None)
        .expect("build")
        .assignment;
    let second = window(config, 99)
        .build("orders", 2, 8, Some(&first))
        .expect("sticky build")
        .assignment;
    (first, second)
}

fn golden_text(config: &DkgConfig) -> String {
    let (first, second) = builds(config);
    format!(
        "{}\n{}\n",
        String::from_utf8(first.to_json()).expect("utf-8"),
        String::from_utf8(second.to_json()).expect("utf-8")
    )
}

#[test]
fn splitting_off_builds_what_the_code_before_splitting_built() {
    let config = DkgConfig::builder().mu(4.0).build().expect("valid");
    let text = golden_text(&config);
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/split_off.golden.json"
    );
    let golden = std::fs::read_to_string(path).expect("the golden file");
    assert_eq!(text, golden);
}

fn auto() -> DkgConfig {
    DkgConfig::builder()
        .mu(4.0)
        .split(SplitKeys::Auto)
        .build()
        .expect("valid")
}

/// Checks every split entry against the rule: distinct partitions, at most `min(k, 64)` parts, only
/// keys over the threshold, each part at most the mean load; returns the split keys.
fn check_splits(s: &Sketch, a: &Assignment) -> Vec<Vec<u8>> {
    let (k, n) = (a.partitions(), s.total());
    let mut split = Vec::new();
    for hk in a.heavy() {
        let over = hk.weight as f64 * f64::from(k) > (1.0 + DEFAULT_SPLIT_SLACK) * n as f64;
        if !s.split().allows(&hk.key) || !over {
            assert!(!hk.is_split(), "{:?} split under the threshold", hk.key);
            continue;
        }
        assert!(hk.is_split(), "{:?} over the threshold but whole", hk.key);
        let parts = hk.split.len();
        assert!(
            parts >= 2 && parts <= (k as usize).min(MAX_SPLIT_PARTS),
            "{parts} parts"
        );
        assert_eq!(parts as u32, split_parts(hk.weight, n, k));
        let distinct: HashSet<u32> = hk.split.iter().map(|p| p.partition).collect();
        assert_eq!(
            distinct.len(),
            parts,
            "parts share a partition: {:?}",
            hk.split
        );
        assert_eq!(hk.partition, hk.split[0].partition);
        if parts < MAX_SPLIT_PARTS {
            // The fewest parts that keep each under the mean: one less would not.
            assert!(hk.weight.div_ceil(parts as u64) as f64 <= n as f64 / f64::from(k) + 1.0);
            assert!((hk.weight as f64 / (parts - 1) as f64) > n as f64 / f64::from(k));
        }
        let sum: u64 = hk.split.iter().map(|p| u64::from(p.weight)).sum();
        assert!(sum <= MAX_SPLIT_WEIGHT_SUM);
        split.push(hk.key.clone());
    }
    split
}

#[test]
fn a_key_at_30_percent_of_12_partitions_splits_in_4_and_the_prediction_falls_to_the_mean() {
    let off = window(&DkgConfig::builder().mu(4.0).build().expect("valid"), 0)
        .build("orders", 1, 7, None)
        .expect("build");
    assert!(
        (off.predicted_imbalance - 2.6).abs() < 1e-9,
        "the bound: 0.3 * 12 - 1"
    );
    assert_eq!(off.split_keys, 0);
    let s = window(&auto(), 0);
    let build = s.build("orders", 1, 7, None).expect("build");
    assert_eq!(build.split_keys, 1);
    assert_eq!(check_splits(&s, &build.assignment), vec![b"hot".to_vec()]);
    let hot = &build.assignment.heavy()[0];
    assert_eq!(hot.key, b"hot");
    // 6000 of 20,000 records: 3.6 fair shares -> 4 parts, sized to level their partitions.
    assert_eq!(hot.split.len(), 4);
    assert!(
        build.predicted_imbalance < 0.05,
        "{}",
        build.predicted_imbalance
    );
    check_prediction(&s, &build);
}

/// The window's prediction of the document (split keys spread by the written weights) matches the
/// build's loads within the rounding bound of `split_weights` (per part `(1 + 1.5 p) / (S - p / 2)`
/// of the key's weight, plus a record for `spread`'s rounding).
fn check_prediction(s: &Sketch, build: &dkg_kafka_core::Build) {
    let a = &build.assignment;
    let n = s.total() as f64;
    let mut tolerance = vec![1e-9; a.partitions() as usize];
    for hk in a.heavy().iter().filter(|h| h.is_split()) {
        let p = hk.split.len() as f64;
        let scale = MAX_SPLIT_WEIGHT_SUM as f64 - 2.0 * p;
        for part in &hk.split {
            tolerance[part.partition as usize] +=
                (hk.weight as f64 * (1.0 + 1.5 * p) / (scale - p / 2.0) + 1.0) / n;
        }
    }
    let predicted = s.predict(a).expect("same shape");
    for ((x, y), t) in predicted.iter().zip(a.predicted_load()).zip(&tolerance) {
        assert!(
            (x - y).abs() <= *t,
            "{predicted:?} vs {:?}",
            a.predicted_load()
        );
    }
}

#[test]
fn with_nothing_over_the_threshold_auto_builds_exactly_what_off_builds() {
    // "hot" at 8% of 12 partitions: under 1/12 (8.33%), so nothing splits.
    let config = |split| {
        DkgConfig::builder()
            .mu(4.0)
            .split(split)
            .build()
            .expect("valid")
    };
    let learn = |config: &DkgConfig| {
        let mut s = Sketch::new(config, 12).expect("valid");
        s.observe_weighted(b"hot", 800);
        for i in 0..9200u32 {
            s.observe(format!("k{}", i % 700).as_bytes());
        }
        s.build("orders", 1, 0, None).expect("build")
    };
    let (off, auto) = (
        learn(&config(SplitKeys::Off)),
        learn(&config(SplitKeys::Auto)),
    );
    assert_eq!(auto.split_keys, 0);
    assert_eq!(auto.assignment.to_json(), off.assignment.to_json());
}

#[test]
fn the_allow_list_splits_only_its_keys_and_only_over_the_threshold() {
    let allow = |keys: &[&[u8]]| {
        DkgConfig::builder()
            .mu(4.0)
            .split(SplitKeys::Allow(keys.iter().map(|k| k.to_vec()).collect()))
            .build()
            .expect("valid")
    };
    let learn = |config: &DkgConfig| {
        let mut s = Sketch::new(config, 10).expect("valid");
        s.observe_weighted(b"a", 3000); // 30%: over 1/10
        s.observe_weighted(b"b", 2000); // 20%: over 1/10
        s.observe_weighted(b"c", 500); // 5%: under
        for i in 0..4500u32 {
            s.observe(format!("k{}", i % 900).as_bytes());
        }
        s
    };
    let s = learn(&allow(&[b"b", b"c"]));
    let build = s.build("t", 1, 0, None).expect("build");
    assert_eq!(check_splits(&s, &build.assignment), vec![b"b".to_vec()]);
    assert_eq!(build.split_keys, 1);
    let b = entry(&build.assignment, b"b");
    assert_eq!(b.split.len(), 2);
    // "a" stays whole (not listed): its partition carries at least its 30%.
    assert!(build.predicted_imbalance >= 2.0 - 1e-9);
    let s = learn(&allow(&[]));
    assert_eq!(s.build("t", 1, 0, None).expect("build").split_keys, 0);
}

/// The heavy entry of `key` (which must be heavy).
fn entry<'a>(a: &'a Assignment, key: &[u8]) -> &'a dkg_kafka_core::HeavyKey {
    a.heavy()
        .iter()
        .find(|h| h.key == key)
        .unwrap_or_else(|| panic!("{key:?} is not heavy"))
}

/// 12 partitions, split `auto`: `hot` records of "hot", `rest` spread evenly over 1,500 keys.
fn hot_and_uniform(hot: u64, rest: u32) -> Sketch {
    let mut s = Sketch::new(&auto(), 12).expect("valid");
    s.observe_weighted(b"hot", hot);
    for i in 0..rest {
        s.observe(format!("key-{}", i % 1500).as_bytes());
    }
    s
}

#[test]
fn a_sticky_rebuild_keeps_the_parts_where_they_were() {
    let first_window = window(&auto(), 0);
    let first = first_window.build("orders", 1, 0, None).expect("build");
    let second_window = window(&auto(), 99);
    let second = second_window
        .build("orders", 2, 0, Some(&first.assignment))
        .expect("build");
    let parts = |a: &Assignment| a.heavy()[0].split.clone();
    let partitions =
        |a: &Assignment| -> Vec<u32> { parts(a).iter().map(|p| p.partition).collect() };
    assert_eq!(
        partitions(&second.assignment),
        partitions(&first.assignment)
    );
    assert!(second.moved_share < 0.1, "{}", second.moved_share);
    check_splits(&second_window, &second.assignment);
    // Now "hot" grows to 45% (6 parts): its 4 old parts stay, two new ones join on other partitions.
    let grown = hot_and_uniform(9000, 11_000);
    let third = grown
        .build("orders", 3, 0, Some(&second.assignment))
        .expect("build");
    let now = parts(&third.assignment);
    assert_eq!(now.len(), 6);
    let before = partitions(&second.assignment);
    assert_eq!(
        now[..4].iter().map(|p| p.partition).collect::<Vec<_>>(),
        before
    );
    check_splits(&grown, &third.assignment);
    // And back under the threshold: whole again, on the partition of its first part.
    let shrunk = hot_and_uniform(700, 9300);
    let fourth = shrunk
        .build("orders", 4, 0, Some(&third.assignment))
        .expect("build");
    let hot = entry(&fourth.assignment, b"hot");
    assert!(!hot.is_split());
    assert_eq!(hot.partition, now[0].partition);
}

#[test]
fn the_split_setting_is_config_not_learned_state() {
    let config = DkgConfig::builder()
        .split(SplitKeys::Allow(
            [b"\xff\x00".to_vec(), b"hot".to_vec()].into(),
        ))
        .build()
        .expect("valid");
    let json = serde_json::to_string(&config).expect("serialize");
    assert!(
        json.contains(r#""split":{"allow":["aG90","/wA="]}"#),
        "{json}"
    );
    assert_eq!(
        serde_json::from_str::<DkgConfig>(&json).expect("parse"),
        config
    );
    // Off is not written: configurations read as before.
    let off = serde_json::to_string(&DkgConfig::default()).expect("serialize");
    assert!(!off.contains("split"), "{off}");
    assert!(serde_json::from_str::<DkgConfig>(r#"{"split":"sometimes"}"#).is_err());
    // A shipped sketch carries no split policy: the merging instance's own applies.
    let s = Sketch::new(&config, 4).expect("valid");
    let back: Sketch =
        serde_json::from_str(&serde_json::to_string(&s).expect("serialize")).expect("parse");
    assert_eq!(back.split(), &SplitKeys::Off);
    assert_eq!(
        serde_json::to_string(&back).expect("serialize"),
        serde_json::to_string(&s).expect("serialize")
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn split_builds_follow_the_rule(
        heavy in proptest::collection::vec(1_u64..40_000, 1..6),
        filler in 0_u64..40_000,
        k in 2_u32..120,
    ) {
        let config = DkgConfig::builder().mu(2.0).split(SplitKeys::Auto).build().expect("valid");
        let mut s = Sketch::new(&config, k).expect("valid");
        for (i, &w) in heavy.iter().enumerate() {
            s.observe_weighted(format!("heavy-{i}").as_bytes(), w);
        }
        for i in 0..filler / 100 {
            s.observe_weighted(format!("f{i}").as_bytes(), 100);
        }
        let build = s.build("t", 1, 0, None).expect("build");
        let split = check_splits(&s, &build.assignment);
        prop_assert_eq!(build.split_keys, split.len());
        // The parts' records add up to the key's weight, and spread by the written weights they give
        // the build's loads within the rounding bound.
        for hk in build.assignment.heavy().iter().filter(|h| h.is_split()) {
            let spread: u64 = dkg_kafka_core::spread(hk.weight, &hk.split).map(|(_, r)| r).sum();
            prop_assert_eq!(spread, hk.weight);
        }
        check_prediction(&s, &build);
        // A sticky rebuild on the same window keeps every part where it is.
        let again = s.build("t", 2, 0, Some(&build.assignment)).expect("build");
        prop_assert_eq!(again.assignment.heavy(), build.assignment.heavy());
        prop_assert_eq!(again.moved_share, 0.0);
    }

    #[test]
    fn split_weights_are_proportional_within_the_documented_bound(
        loads in proptest::collection::vec(0_u64..10_000_000, 2..=64),
    ) {
        let w = split_weights(&loads);
        prop_assert_eq!(w.len(), loads.len());
        prop_assert!(w.iter().all(|&x| x >= 1));
        let sum: u64 = w.iter().map(|&x| u64::from(x)).sum();
        prop_assert!(sum <= MAX_SPLIT_WEIGHT_SUM);
        let total: u64 = loads.iter().sum();
        if total > 0 {
            let p = loads.len() as f64;
            let scale = MAX_SPLIT_WEIGHT_SUM as f64 - 2.0 * p;
            for (&x, &l) in w.iter().zip(&loads) {
                let share = l as f64 / total as f64;
                let bound = (1.0 + 1.5 * p * share) / (scale - p / 2.0);
                prop_assert!((f64::from(x) / sum as f64 - share).abs() <= bound + 1e-12,
                    "{x}/{sum} vs {share} (bound {bound})");
            }
        }
    }
}
