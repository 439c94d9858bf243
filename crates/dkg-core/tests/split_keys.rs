//! Split placement (issue 15, item 1): with splitting off, builds are byte for byte what they were
//! before splitting existed (the golden file was written by the code of commit c01087a).

use dkg_core::{Assignment, DkgConfig, Sketch};

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
