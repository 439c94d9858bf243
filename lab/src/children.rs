//! Process supervision for the tools that run subcommands as children (`demo`, `soak`): each child in
//! its own process group with its output in a log file, stopped in order (SIGTERM, then SIGKILL) at the
//! end. A child runs the lab's own subcommands from this executable and the product's (`run`) from the
//! `dkg-sampler` binary ([`exe_for`]): the sidecar under test is the one users deploy.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;

/// The `dkg-sampler` subcommands; every other one is the lab's own.
const PRODUCT_COMMANDS: &[&str] = &["run", "inspect", "retract"];

/// The executable that runs `subcommand`: this one for the lab's, `dkg-sampler` for the product's
/// ([`sampler_exe`]).
pub(crate) fn exe_for(subcommand: &str) -> anyhow::Result<PathBuf> {
    if PRODUCT_COMMANDS.contains(&subcommand) {
        sampler_exe()
    } else {
        std::env::current_exe().context("locating the dkg-lab executable")
    }
}

/// The `dkg-sampler` binary: `DKG_SAMPLER_BIN` if set, else the one beside this executable (cargo
/// builds both into the same `target/<profile>/`; the lab image installs both in one folder).
pub(crate) fn sampler_exe() -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os("DKG_SAMPLER_BIN") {
        let path = PathBuf::from(path);
        anyhow::ensure!(
            path.is_file(),
            "DKG_SAMPLER_BIN={} is not a file",
            path.display()
        );
        return Ok(path);
    }
    let me = std::env::current_exe().context("locating the dkg-lab executable")?;
    let beside = me.with_file_name(format!("dkg-sampler{}", std::env::consts::EXE_SUFFIX));
    anyhow::ensure!(
        beside.is_file(),
        "no dkg-sampler beside {} (build it: cargo build -p dkg-sampler, or set DKG_SAMPLER_BIN)",
        me.display()
    );
    Ok(beside)
}

/// The child processes, stopped (SIGTERM, then SIGKILL) when the demo ends.
#[derive(Debug, Default)]
pub(crate) struct Children {
    list: Vec<(String, Child, PathBuf)>,
}

impl Children {
    pub(crate) fn spawn(
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
    pub(crate) fn exited(&mut self) -> Option<(String, String, bool)> {
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

    /// The process id of the child `name`, while it is known.
    pub(crate) fn pid(&self, name: &str) -> Option<u32> {
        self.list
            .iter()
            .find(|(n, _, _)| n == name)
            .map(|(_, c, _)| c.id())
    }

    /// The exit status of the child `name` once it has exited.
    pub(crate) fn status(&mut self, name: &str) -> anyhow::Result<Option<ExitStatus>> {
        match self.list.iter_mut().find(|(n, _, _)| n == name) {
            Some((_, child, _)) => child
                .try_wait()
                .with_context(|| format!("waiting for {name}")),
            None => Ok(None),
        }
    }

    pub(crate) fn remove(&mut self, name: &str) {
        self.list.retain(|(n, _, _)| n != name);
    }

    pub(crate) fn stop_all(&mut self) {
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
