//! Child processes and the small plumbing around them: free local ports, a minimal HTTP GET, polling
//! with a deadline.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// A child process whose stdout and stderr go to a log file. Dropped, it gets SIGTERM and 10 s to exit
/// (then SIGKILL); when the test is panicking its log is printed, so a failure shows what the child did.
#[derive(Debug)]
pub struct LoggedChild {
    name: String,
    child: Option<Child>,
    log: PathBuf,
}

impl LoggedChild {
    /// Spawn `command` (stdin null) with its output in `log`; panics if it cannot start.
    pub fn spawn(name: &str, mut command: Command, log: PathBuf) -> Self {
        let file = std::fs::File::create(&log)
            .unwrap_or_else(|e| panic!("creating {}: {e}", log.display()));
        let child = command
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("duplicate the log file"))
            .stderr(file)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {name} ({command:?}): {e}"));
        Self {
            name: name.to_owned(),
            child: Some(child),
            log,
        }
    }

    /// The name given at spawn.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The process's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Its exit status, if it has exited.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
    }

    /// Wait for the process to exit by itself, at most `timeout`; panics (with its log) otherwise.
    pub fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.exited() {
                self.child = None;
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "{} did not exit within {timeout:?}:\n{}",
                self.name,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGKILL (a crash: no shutdown code runs), then reap it.
    pub fn kill(&mut self) -> ExitStatus {
        let mut child = self
            .child
            .take()
            .unwrap_or_else(|| panic!("{} already exited", self.name));
        child
            .kill()
            .unwrap_or_else(|e| panic!("SIGKILL {}: {e}", self.name));
        child
            .wait()
            .unwrap_or_else(|e| panic!("reaping {}: {e}", self.name))
    }

    /// SIGTERM, then wait for a graceful exit (at most `timeout`).
    pub fn terminate(&mut self, timeout: Duration) -> ExitStatus {
        if let Some(child) = &self.child {
            sigterm(child);
        }
        self.wait_exit(timeout)
    }
}

impl Drop for LoggedChild {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "----- log of {} -----\n{}\n----- end of {} -----",
                self.name,
                self.log(),
                self.name
            );
        }
        if let Some(mut child) = self.child.take() {
            sigterm(&child);
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn sigterm(child: &Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
}

/// The last `lines` lines of the file at `path` (empty if unreadable).
pub fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// The path of the workspace binary `name` (`dkg-sampler`, `dkg-lab`) for a test of another package,
/// where cargo sets no `CARGO_BIN_EXE_<name>`: `DKG_SAMPLER_BIN` / `DKG_LAB_BIN` (the name upper-cased,
/// `-` as `_`, then `_BIN`) if set; else the one in this test's `target/<profile>/`, built there first
/// with `cargo build -p <name> --bin <name>` when it is missing (a targeted `cargo test -p X --test Y`
/// builds only X's binaries). Panics if it cannot be found or built.
pub fn workspace_bin(name: &str) -> PathBuf {
    static BUILD: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let var = format!("{}_BIN", name.to_uppercase().replace('-', "_"));
    if let Some(path) = std::env::var_os(&var) {
        let path = PathBuf::from(path);
        assert!(path.is_file(), "{var}={} is not a file", path.display());
        return path;
    }
    // target/<profile>/deps/<test>-<hash>: the binary is target/<profile>/<name>.
    let exe = std::env::current_exe().expect("this test's executable");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("a test executable lives in target/<profile>/deps");
    let bin = profile_dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    let _one_build = BUILD
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if !bin.is_file() {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut build = Command::new(cargo);
        build.args(["build", "-p", name, "--bin", name]);
        if profile_dir.file_name().is_some_and(|p| p == "release") {
            build.arg("--release");
        }
        if let Some(target) = profile_dir.parent() {
            build.env("CARGO_TARGET_DIR", target);
        }
        let status = build
            .status()
            .unwrap_or_else(|e| panic!("running cargo build -p {name}: {e}"));
        assert!(status.success(), "cargo build -p {name} failed: {status}");
    }
    assert!(
        bin.is_file(),
        "{name} not found at {} (set {var})",
        bin.display()
    );
    bin
}

/// Run `cmd` to its end; assert it exits 0 (its status, stdout and stderr in the message, `what`
/// naming it); its stdout.
pub fn run_ok(cmd: &mut Command, what: &str) -> String {
    let output = cmd
        .output()
        .unwrap_or_else(|e| panic!("running {what}: {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{what} failed: {}\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// A free TCP port on 127.0.0.1 (bound and released; good enough for tests).
pub fn free_addr() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind :0");
    l.local_addr().expect("local addr")
}

/// `GET path` on `addr`: (status, body). Plain HTTP/1.1 over std, no client dependency; a chunked body
/// is decoded.
pub fn http_get(addr: SocketAddr, path: &str) -> std::io::Result<(u16, String)> {
    http_get_with_head(addr, path).map(|(status, _, body)| (status, body))
}

/// [`http_get`] with the response's head (status line and headers) too: (status, head, body).
/// The read timeout (10 s) allows for a Prometheus query on a busy machine.
pub fn http_get_with_head(addr: SocketAddr, path: &str) -> std::io::Result<(u16, String, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("bad response: {head}")))?;
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_owned()
    };
    Ok((status, head.to_owned(), body))
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].strip_prefix("\r\n").unwrap_or(&rest[n..]);
    }
    out
}

/// Poll `f` every 100 ms until it returns `Some`, at most `timeout`; panics with `what` otherwise.
pub fn wait_for<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunked_bodies_are_decoded() {
        assert_eq!(
            dechunk("5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"),
            "hello world"
        );
        // A truncated chunk ends the body instead of panicking.
        assert_eq!(dechunk("5\r\nhel"), "");
    }

    #[test]
    fn a_child_is_logged_and_waited_for() {
        let log = std::env::temp_dir().join(format!("dkg-testkit-{}.log", std::process::id()));
        let mut command = Command::new("sh");
        command.args(["-c", "echo started; exit 3"]);
        let mut child = LoggedChild::spawn("sh", command, log.clone());
        let status = child.wait_exit(Duration::from_secs(10));
        assert_eq!(status.code(), Some(3));
        assert_eq!(child.log().trim(), "started");
        assert_eq!(tail(&log, 1), "started");
        let _ = std::fs::remove_file(log);
    }
}
