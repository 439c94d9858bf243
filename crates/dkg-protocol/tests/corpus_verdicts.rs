//! The committed verdicts of the assignment decoder on the fuzz corpus (`spec/corpus/`) are what
//! this decoder says today, so the Java, Python and Go replays compare against the Rust decoder,
//! never a stale file.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../examples/corpus_verdicts/verdicts.rs"]
mod verdicts;

use std::collections::BTreeMap;

const REGENERATE: &str = "regenerate with `cargo run -p dkg-protocol --example corpus_verdicts` and review \
     the diff: a changed verdict is a change of the decoder's rules (docs/spec.md 4)";

#[test]
fn committed_verdicts_are_the_decoders() {
    let path = verdicts::repo_root().join(verdicts::VERDICTS_FILE);
    let committed = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}; {REGENERATE}", path.display()));
    let fresh = verdicts::verdicts_file().unwrap();
    if committed != fresh {
        let parse = |s: &str| -> BTreeMap<String, String> {
            serde_json::from_str::<serde_json::Value>(s).unwrap()["verdicts"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
                .collect()
        };
        let (old, new) = (parse(&committed), parse(&fresh));
        let changed: Vec<String> = old
            .keys()
            .chain(new.keys())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .filter(|k| old.get(*k) != new.get(*k))
            .take(20)
            .map(|k| format!("{k}: committed {:?}, now {:?}", old.get(k), new.get(k)))
            .collect();
        panic!(
            "{} differs from the decoder's verdicts ({REGENERATE}); first differences:\n{}",
            verdicts::VERDICTS_FILE,
            changed.join("\n")
        );
    }
}

/// The corpus is large and varied enough to be a differential check: a few hundred inputs, both
/// verdicts, every decoding reason, and the epoch boundary of spec 4 (2^53-1 accepted, 2^53 not).
#[test]
fn corpus_covers_every_reason() {
    let dir = verdicts::repo_root().join(verdicts::CORPUS_DIR);
    let names = verdicts::corpus_files().unwrap();
    assert!(
        names.len() >= 300,
        "only {} inputs in {}",
        names.len(),
        verdicts::CORPUS_DIR
    );
    let mut by_verdict: BTreeMap<&str, usize> = BTreeMap::new();
    let mut total = 0;
    for name in &names {
        let bytes = std::fs::read(dir.join(name)).unwrap();
        total += bytes.len();
        *by_verdict.entry(verdicts::verdict(&bytes)).or_default() += 1;
    }
    assert!(
        total < 2 << 20,
        "the corpus is {total} bytes; keep it under 2 MiB"
    );
    for want in [
        "accept",
        "malformed_json",
        "unsupported_version",
        "out_of_range",
        "invalid",
    ] {
        assert!(
            by_verdict.get(want).copied().unwrap_or(0) > 0,
            "no input with verdict {want}: {by_verdict:?}"
        );
    }
    // By content, not by name: `cargo fuzz cmin` renames what it keeps.
    let epoch_boundary = |epoch: &str, want: &str| {
        names.iter().any(|name| {
            let bytes = std::fs::read(dir.join(name)).unwrap();
            let text = String::from_utf8_lossy(&bytes);
            text.contains(&format!("\"epoch\":{epoch},")) && verdicts::verdict(&bytes) == want
        })
    };
    assert!(
        epoch_boundary("9007199254740991", "accept"),
        "no accepted input at epoch 2^53-1"
    );
    assert!(
        epoch_boundary("9007199254740992", "out_of_range"),
        "no rejected input at epoch 2^53"
    );
    assert!(
        epoch_boundary("18446744073709551615", "out_of_range"),
        "no rejected input at epoch 2^64-1"
    );
}
