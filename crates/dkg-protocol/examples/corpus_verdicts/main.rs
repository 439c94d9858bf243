//! Writes `spec/corpus/assignment.json`: the assignment decoder's verdict on every input of the
//! committed fuzz corpus `spec/corpus/assignment/` (see `spec/corpus/README.md`).
//!
//! ```text
//! cargo run -p dkg-protocol --example corpus_verdicts
//! ```
//!
//! Deterministic: the same corpus and decoder write the same bytes. `tests/corpus_verdicts.rs`
//! regenerates the file in memory and fails if the committed one differs.

mod verdicts;

fn main() -> std::io::Result<()> {
    let path = verdicts::repo_root().join(verdicts::VERDICTS_FILE);
    std::fs::write(&path, verdicts::verdicts_file()?)?;
    println!(
        "wrote {} ({} inputs)",
        verdicts::VERDICTS_FILE,
        verdicts::corpus_files()?.len()
    );
    Ok(())
}
