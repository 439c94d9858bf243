//! Fuzz the handoff-topic record decoder (`dkg_kafka_protocol::handoff::decode`, spec section 9): any key
//! and value must give an entry or an error, never a panic; a parsed key re-encodes to itself; an
//! entry is about the topic its key names.
//!
//! `scripts/fuzz handoff_decode` (records framed as in `frames.rs`).
#![no_main]

use dkg_kafka_protocol::handoff::{HandoffKey, decode};
use libfuzzer_sys::fuzz_target;

#[path = "frames.rs"]
mod frames;

fuzz_target!(|data: &[u8]| {
    for (key, value) in frames::records(data) {
        let parsed = key.and_then(HandoffKey::parse);
        if let Some(k) = &parsed {
            assert_eq!(HandoffKey::parse(k.encode().as_bytes()).as_ref(), Some(k), "{k:?}");
        }
        match decode(key, value) {
            Ok(entry) => {
                let k = parsed.expect("an entry needs a well-formed key");
                assert_eq!(entry.topic(), k.topic());
            }
            Err(reason) => assert!(!reason.is_empty()),
        }
    }
});
