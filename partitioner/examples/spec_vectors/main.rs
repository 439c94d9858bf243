//! Writes the golden vectors of `docs/spec.md` (the files of `spec/vectors/`, see its README).
//!
//! ```text
//! cargo run -p dkg-kafka --example spec_vectors -- spec/vectors
//! ```
//!
//! Deterministic: the same source writes the same bytes. `tests/spec_vectors.rs` regenerates them
//! in memory and fails if the committed files differ.

mod vectors;

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = PathBuf::from(
        std::env::args_os()
            .nth(1)
            .unwrap_or_else(|| "spec/vectors".into()),
    );
    std::fs::create_dir_all(&dir)?;
    for (name, generate) in vectors::FILES {
        let path = dir.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, generate())?;
        println!("wrote {}", path.display());
    }
    Ok(())
}
