//! Process supervision for the demo: its child processes (this binary's `run` and `loadgen`), each in its
//! own process group with its log in a file, stopped in order (SIGTERM, then SIGKILL) when the demo ends.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use super::Side;
use super::scrape::http_get;

/// The child processes, stopped (SIGTERM, then SIGKILL) when the demo ends.
#[derive(Debug, Default)]
pub(super) struct Children {
    list: Vec<(String, Child, PathBuf)>,
}

impl Children {
    pub(super) fn spawn(
        &mut self,
        exe: &Path,
        name: &str,
        args: &[String],
        env: &[(&str, String)],
        log_dir: &Path,
    ) -> anyhow::Result<()> {
        let log = log_dir.join(format!("{name}.log"));
        let file =
            std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        // Own process group: a Ctrl-C in the terminal reaches the demo only, which then stops the children
        // in order (SIGTERM) and still prints the summary.
        let child = Command::new(exe)
            .process_group(0)
            .args(args)
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into()),
            )
            .env("NO_COLOR", "1")
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file)
            .spawn()
            .with_context(|| format!("starting {} {}", exe.display(), args.join(" ")))?;
        self.list.push((name.to_string(), child, log));
        Ok(())
    }

    /// The first child that has exited, with its status and the tail of its log.
    pub(super) fn exited(&mut self) -> Option<(String, String, bool)> {
        for (name, child, log) in &mut self.list {
            if let Ok(Some(status)) = child.try_wait() {
                return Some((
                    name.clone(),
                    format!("{status}\n{}", tail(log, 15)),
                    status.success(),
                ));
            }
        }
        None
    }

    pub(super) fn remove(&mut self, name: &str) {
        self.list.retain(|(n, _, _)| n != name);
    }

    pub(super) fn stop_all(&mut self) {
        for (_, child, _) in &mut self.list {
            if matches!(child.try_wait(), Ok(None)) {
                // SIGTERM lets the samplers and producers shut down cleanly (flush, leave the group).
                let _ = Command::new("kill")
                    .args(["-TERM", &child.id().to_string()])
                    .stderr(Stdio::null())
                    .status();
            }
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        for (_, child, _) in &mut self.list {
            while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            if matches!(child.try_wait(), Ok(None)) {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        self.list.clear();
    }
}

impl Drop for Children {
    fn drop(&mut self) {
        self.stop_all();
    }
}

fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

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
