//! The demo's wait for its samplers (process supervision itself is [`crate::children`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::bail;

use super::Side;
use super::scrape::http_get;
use crate::children::Children;

/// Wait until every side's sampler answers `/healthz` (a child that exits first fails the demo).
pub(super) fn wait_healthy(
    sides: &[&Side],
    children: &mut Children,
    timeout: Duration,
    stop: &AtomicBool,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    for side in sides {
        loop {
            if let Some((name, detail, _)) = children.exited() {
                bail!("{name} exited before it served /healthz: {detail}");
            }
            if http_get(side.metrics, "/healthz").is_ok_and(|(code, _)| code == 200) {
                break;
            }
            if Instant::now() > deadline || stop.load(Ordering::SeqCst) {
                bail!(
                    "the sampler of {} did not answer /healthz on {} in time",
                    side.topic,
                    side.metrics
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    Ok(())
}
