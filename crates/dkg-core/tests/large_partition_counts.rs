//! Assignments for 10,000 partitions with the default configuration fit Kafka's default message limits
//! (issue 16, item 3; `DkgConfig::default`'s mu rule; BENCHMARKS.md "Scale").

use dkg_kafka_core::{Assignment, DEFAULT_LIMITS_DOCUMENT_BYTES, DkgConfig, Route, Sketch};

const K: u32 = 10_000;

/// 2,500 hot keys of 8 bytes with 20 records each, interleaved with 450,000 keys seen once: more heavy
/// keys than Zipf(1.0) over 10^8 keys gives at this k (about 2,100), each above theta = 1/(4k).
fn learned(config: &DkgConfig) -> Sketch {
    let mut sketch = Sketch::new(config, K).expect("valid configuration");
    for round in 0..20u32 {
        for h in 0..2500u32 {
            sketch.observe(format!("hot{h:05}").as_bytes());
        }
        for c in 0..22_500u32 {
            sketch.observe(format!("cold{}", round * 22_500 + c).as_bytes());
        }
    }
    sketch
}

#[test]
fn ten_thousand_partitions_default_document_fits_the_default_limits() {
    let config = DkgConfig::default();
    let sketch = learned(&config);
    let build = sketch.build("orders", 1, 0, None).expect("build");
    assert_eq!(build.assignment.buckets(), 100_000);
    assert_eq!(build.heavy_hitters, 2500);
    let json = build.assignment.to_json();
    assert!(
        json.len() < DEFAULT_LIMITS_DOCUMENT_BYTES,
        "document of {} bytes, limit {DEFAULT_LIMITS_DOCUMENT_BYTES}",
        json.len()
    );
    // The estimate the rule relies on bounds the table and predicted_load actually written, and the table
    // text alone (100,000 entries of 4.9 bytes on average) is most of it.
    let heavy_json = serde_json::to_vec(build.assignment.heavy()).expect("heavy list encodes");
    let table_json = serde_json::to_vec(build.assignment.table()).expect("table encodes");
    let fixed_actual = json.len() - heavy_json.len();
    let estimate = config.fixed_document_bytes_for(K) as usize;
    assert!(
        table_json.len() < fixed_actual && fixed_actual <= estimate,
        "table {} bytes, fixed part {fixed_actual} bytes, estimate {estimate}",
        table_json.len()
    );
    assert!(
        table_json.len() * 100 > estimate * 60,
        "table {} bytes, estimate {estimate}",
        table_json.len()
    );
    // What was encoded decodes to the same routing.
    let decoded = Assignment::from_json(&json).expect("decodes");
    assert_eq!(decoded, build.assignment);
    assert_eq!(decoded.route(b"hot00042").1, Route::Heavy);
    assert_eq!(decoded.route(b"cold7").1, Route::Bucket);
}

#[test]
fn ten_thousand_partitions_with_mu_64_builds_but_outgrows_the_default_limits() {
    let config = DkgConfig::builder().mu(64.0).build().expect("valid");
    assert!(!config.fits_default_limits(K));
    let build = learned(&config).build("orders", 1, 0, None).expect("build");
    let len = build.assignment.to_json().len();
    assert!(
        len > 3 * DEFAULT_LIMITS_DOCUMENT_BYTES,
        "640,000 entries should be over 3 MB, got {len}"
    );
}
