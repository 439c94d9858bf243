//! The sampler's consume path compiled into the benches (`#[path]`): the window, the read-fraction
//! schedule and the consume loop, as siblings so that `super::window` resolves as in `src/sidecar/`.

#[allow(dead_code)]
#[path = "../../src/sidecar/window.rs"]
pub mod window;

#[allow(dead_code)]
#[path = "../../src/sidecar/fraction.rs"]
pub mod fraction;

#[allow(dead_code)]
#[path = "../../src/sidecar/misplaced.rs"]
pub mod misplaced;

#[allow(dead_code)]
#[path = "../../src/sidecar/ingest.rs"]
pub mod ingest;
