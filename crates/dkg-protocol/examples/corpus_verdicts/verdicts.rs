//! The verdicts of the assignment decoder on the committed fuzz corpus (`spec/corpus/assignment/`,
//! see `spec/corpus/README.md`): for every input file, `accept` or the reject reason label.
//!
//! Shared by `examples/corpus_verdicts` (writes `spec/corpus/assignment.json`) and
//! `tests/corpus_verdicts.rs` (regenerates it in memory and compares), the way `spec/vectors/` is
//! made. The Java, Python and Go decoders replay the corpus against this file.

use std::path::{Path, PathBuf};

use dkg_core::Assignment;
use dkg_core::assignment::ControlDocument;
use dkg_protocol::book::{AssignmentBook, ControlUpdate};

/// The corpus folder, relative to the repository root.
pub const CORPUS_DIR: &str = "spec/corpus/assignment";
/// The verdicts file, relative to the repository root.
pub const VERDICTS_FILE: &str = "spec/corpus/assignment.json";

/// The repository root (this crate lives in `crates/dkg-protocol`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// What a producer's decoder (`Assignment::from_json` in Rust, `Assignment.fromJson` in Java,
/// `Assignment.from_json` in Python, `DecodeAssignment` in Go) does with `bytes`: `accept`, or the
/// label the control topic's book gives the rejection (`spec/vectors/reject.json`'s vocabulary).
/// A valid version 2 document of another kind (a retraction or a generation record) is not an
/// assignment: `invalid`, as the other languages' assignment decoders say.
pub fn verdict(bytes: &[u8]) -> &'static str {
    if Assignment::from_json(bytes).is_ok() {
        return "accept";
    }
    if ControlDocument::from_json(bytes).is_ok() {
        return "invalid";
    }
    // The book checks the key, then the size, then decodes: under any valid key a document that
    // does not decode gets the decoding's own reason.
    match AssignmentBook::new().apply(Some(b"-"), Some(bytes)) {
        ControlUpdate::Rejected { reason, .. } => reason.as_str(),
        other => panic!("the book accepted a document Assignment::from_json rejects: {other:?}"),
    }
}

/// The corpus file names, sorted (libFuzzer names them by the SHA-1 of their bytes).
pub fn corpus_files() -> std::io::Result<Vec<String>> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(repo_root().join(CORPUS_DIR))? {
        let entry = entry?;
        if entry.file_type()?.is_file() {
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    names.sort();
    Ok(names)
}

/// The verdicts file: one line per input, `"name": "verdict"`, sorted by name, so a change shows
/// as one line of the diff.
pub fn verdicts_file() -> std::io::Result<String> {
    let dir = repo_root().join(CORPUS_DIR);
    let mut lines = Vec::new();
    for name in corpus_files()? {
        let bytes = std::fs::read(dir.join(&name))?;
        lines.push(format!(
            "    {}: {}",
            serde_json::to_string(&name).expect("a string serializes"),
            serde_json::to_string(verdict(&bytes)).expect("a string serializes"),
        ));
    }
    Ok(format!(
        "{{\n  \"description\": \"The assignment decoder's verdict on every file of spec/corpus/assignment/: accept, or the reject reason (docs/spec.md 4; written by `cargo run -p dkg-protocol --example corpus_verdicts`)\",\n  \"verdicts\": {{\n{}\n  }}\n}}\n",
        lines.join(",\n")
    ))
}
