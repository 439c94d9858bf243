//! Writes the conformance traces of the consumer rules (the files of `spec/traces/`, see its
//! README).
//!
//! ```text
//! cargo run -p dkg-protocol --example conformance_traces -- spec/traces
//! ```
//!
//! Deterministic: the same source writes the same bytes. `tests/conformance_traces.rs`
//! regenerates them in memory and fails if the committed files differ, then replays every file.

mod driver;
mod scenarios;

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = PathBuf::from(
        std::env::args_os()
            .nth(1)
            .unwrap_or_else(|| "spec/traces".into()),
    );
    std::fs::create_dir_all(&dir)?;
    // Traces of a rule whose scenario was renamed or dropped would linger: remove every generated
    // file first (the README stays).
    for entry in std::fs::read_dir(&dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "json") {
            std::fs::remove_file(&path)?;
        }
    }
    for trace in scenarios::all() {
        let path = dir.join(format!("{}.json", trace.name));
        std::fs::write(&path, trace.to_json())?;
        println!("wrote {} ({} steps)", path.display(), trace.steps.len());
    }
    Ok(())
}
