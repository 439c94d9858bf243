//! Graceful shutdown on SIGTERM / Ctrl-C for the long-running subcommands (`run`, `dkg-lab consume`): the
//! first signal asks the work loop to finish cleanly, a second one exits at once.

use tokio::sync::watch;
use tracing::{info, warn};

/// On the first SIGTERM or Ctrl-C, log `finishing` and send `true` on `stop`; on a second, exit
/// with status 130 (what a shell reports for an interrupted program).
pub fn spawn_signal_handler(stop: watch::Sender<bool>, finishing: &'static str) {
    tokio::spawn(async move {
        #[cfg(unix)]
        let mut term =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        for round in 0..2 {
            #[cfg(unix)]
            let terminated = async {
                match term.as_mut() {
                    Some(t) => {
                        t.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            #[cfg(not(unix))]
            let terminated = std::future::pending::<()>();
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {},
                () = terminated => {},
            }
            if round == 0 {
                info!("signal received: {finishing} (signal again to exit at once)");
                let _ = stop.send(true);
            } else {
                warn!("second signal: exiting now");
                std::process::exit(130);
            }
        }
    });
}
