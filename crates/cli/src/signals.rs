//! Stop signals of a run: SIGINT (Ctrl-C), SIGTERM (`timeout`, `docker stop`, CI
//! cancellation) and SIGHUP all mean "stop admitting, let in-flight requests
//! finish"; a second one cancels them. Installed before any other work starts, so a
//! signal that arrives early is never the default "die without writing the log".

use std::io;

/// The installed handlers; [`StopSignals::recv`] yields each signal as it comes.
pub struct StopSignals {
    #[cfg(unix)]
    streams: [tokio::signal::unix::Signal; 3],
}

impl StopSignals {
    /// Installs the handlers now (needs a Tokio runtime context, not a task).
    pub fn install() -> io::Result<StopSignals> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Ok(StopSignals {
                streams: [
                    signal(SignalKind::interrupt())?,
                    signal(SignalKind::terminate())?,
                    signal(SignalKind::hangup())?,
                ],
            })
        }
        #[cfg(not(unix))]
        {
            Ok(StopSignals {})
        }
    }

    /// The next stop signal's number (2 INT, 15 TERM, 1 HUP); `None` when the
    /// handlers are gone.
    pub async fn recv(&mut self) -> Option<i32> {
        #[cfg(unix)]
        {
            let [int, term, hup] = &mut self.streams;
            tokio::select! {
                s = int.recv() => s.map(|_| 2),
                s = term.recv() => s.map(|_| 15),
                s = hup.recv() => s.map(|_| 1),
            }
        }
        #[cfg(not(unix))]
        {
            tokio::signal::ctrl_c().await.ok().map(|_| 2)
        }
    }
}

/// The exit status of a run stopped by signal `signo` (the shell's 128 + n).
pub fn exit_status(signo: i32) -> u8 {
    u8::try_from(128 + signo).unwrap_or(130)
}
