//! Fuzz the decoder of a shipped window (`dkg_kafka_core::Sketch`'s `Deserialize`, the `sketch` member of
//! a document on the sampler's sketches topic, written by any member): any bytes must give a sketch
//! or an error, never a panic or an unbounded allocation; a decoded sketch re-encodes to one that
//! decodes to the same total, and merges with itself and decays without panicking.
//!
//! `scripts/fuzz sketch_decode`.
#![no_main]

use dkg_kafka_core::Sketch;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(sketch) = serde_json::from_slice::<Sketch>(data) else {
        return;
    };
    let again: Sketch = serde_json::from_slice(&serde_json::to_vec(&sketch).expect("encode"))
        .expect("a decoded sketch re-encodes to a valid one");
    assert_eq!(again.total(), sketch.total());
    let mut merged = sketch.clone();
    merged.merge(&again).expect("a sketch merges with its own copy");
    assert!(merged.total() >= sketch.total());
    merged.decay(0.5);
    let _ = merged.summary().top(8);
});
