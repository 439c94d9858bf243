//! Fuzz the assignment decoder: arbitrary bytes must give `Ok` or a typed error, never a panic;
//! whatever decodes must re-encode to a document that decodes to the same assignment, and its
//! lookup must stay in range.
//!
//! `cargo +nightly fuzz run assignment_decode fuzz/corpus/assignment_decode fuzz/seeds/assignment_decode`
#![no_main]

use dkg_kafka_core::{Assignment, Route};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(a) = Assignment::from_json(data) else {
        return;
    };
    let bytes = a.to_json();
    let b = Assignment::from_json(&bytes).expect("our own encoding decodes");
    assert_eq!(a, b);
    assert_eq!(b.to_json(), bytes, "encoding is canonical");
    let pretty = Assignment::from_json(a.to_json_pretty().as_bytes()).expect("pretty decodes");
    assert_eq!(a, pretty);

    let n = a.partitions();
    for key in [&b""[..], b"hot", b"cold", data] {
        let (p, route) = a.route(key);
        assert!(p < n);
        assert!(a.bucket(key) < a.buckets());
        match route {
            Route::Bucket => assert_eq!(p, a.table()[a.bucket(key) as usize]),
            // A split key's next pick is another record's: only its range and parts are fixed.
            Route::Split => {
                let parts = a.split_of(key).expect("a split route has parts");
                assert!(parts.iter().any(|s| s.partition == p));
                continue;
            }
            Route::Heavy => {}
        }
        assert_eq!(a.partition_for(key), p);
    }
    for h in a.heavy() {
        let (p, route) = a.route(&h.key);
        if h.is_split() {
            assert_eq!(route, Route::Split);
            assert!(h.split.iter().any(|s| s.partition == p));
        } else {
            assert_eq!((p, route), (h.partition, Route::Heavy));
        }
    }
});
