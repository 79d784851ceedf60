//! The live progress line of `tpscope bench`: one line on stderr, redrawn a few
//! times a second, only when stderr is a terminal and `--quiet` is not given. It
//! reads the recorder's live counters and the client's tokens as they stream
//! (tok/s is not only the finished requests'), and flags streams gone silent; it
//! never owns a measurement.

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::thread::JoinHandle;
use std::time::Duration;

use tpscope_client::LiveTokens;
use tpscope_record::{LiveSnapshot, LiveStats};

/// How often the line is redrawn.
const EVERY: Duration = Duration::from_millis(250);

/// No bytes from any stream for this long while requests are in flight is
/// flagged (a hung server looks like a slow one otherwise).
pub const SILENT_AFTER: Duration = Duration::from_secs(5);

/// What one frame shows: the recorder's counters, the tokens streamed so far
/// (`None`: only finished requests' are known), and how long no stream sent
/// anything.
pub struct Frame {
    /// The recorder's counters.
    pub live: LiveSnapshot,
    /// Output tokens streamed in this run, finished or not.
    pub streamed_tokens: Option<u64>,
    /// Time since the last bytes of any stream.
    pub silent_for: Duration,
}

/// A running progress line (a no-op when not drawing).
pub struct Progress {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

/// Whether a progress line would be drawn: stderr is a terminal and not quiet.
pub fn wanted(quiet: bool) -> bool {
    !quiet && std::io::stderr().is_terminal()
}

/// One frame: `label  done/total  TPS  in-flight/cap  queue  gap  errors`, and
/// `silent Ns` when no stream has sent anything for [`SILENT_AFTER`].
pub fn render(f: &Frame) -> String {
    let s = &f.live;
    let tokens = f.streamed_tokens.unwrap_or(s.tokens);
    let mut line = String::new();
    if !s.label.is_empty() {
        line.push_str(&s.label);
        line.push_str("  ");
    }
    match s.planned {
        Some(p) => line.push_str(&format!("{}/{} done", s.done, p)),
        None => line.push_str(&format!("{} done", s.done)),
    }
    if let Some(e) = s.elapsed_s {
        line.push_str(&format!("  {e:.0}s"));
        if e > 0.0 {
            line.push_str(&format!("  {:.0} tok/s", tokens as f64 / e));
        }
    }
    match s.cap {
        Some(c) => line.push_str(&format!("  in flight {}/{}", s.in_flight, c)),
        None => line.push_str(&format!("  in flight {}", s.in_flight)),
    }
    line.push_str(&format!("  queue {}", s.queue_depth));
    if let Some(g) = s.gap_fraction {
        line.push_str(&format!("  gap {:.1}%", g * 100.0));
    }
    if s.in_flight > 0 && f.silent_for >= SILENT_AFTER {
        line.push_str(&format!(
            "  SILENT {:.0}s: no bytes from any of {} streams",
            f.silent_for.as_secs_f64(),
            s.in_flight
        ));
    }
    if s.status.error > 0 {
        line.push_str(&format!("  errors {}", s.status.error));
    }
    if s.status.cancelled > 0 {
        line.push_str(&format!("  cancelled {}", s.status.cancelled));
    }
    if let Some(w) = &s.lagging {
        line.push_str("  ");
        line.push_str(w);
    }
    line
}

impl Progress {
    /// Starts drawing `live` (and `streamed`) on stderr if [`wanted`]; otherwise
    /// does nothing.
    pub fn start(live: Arc<LiveStats>, streamed: Arc<LiveTokens>, quiet: bool) -> Progress {
        let stop = Arc::new(AtomicBool::new(false));
        if !wanted(quiet) {
            return Progress { stop, handle: None };
        }
        let stop2 = stop.clone();
        let handle = std::thread::Builder::new()
            .name("tpscope-progress".into())
            .spawn(move || {
                let mut err = std::io::stderr();
                while !stop2.load(Relaxed) {
                    let frame = Frame {
                        live: live.snapshot(),
                        streamed_tokens: Some(streamed.tokens()),
                        silent_for: streamed.silent_for(std::time::Instant::now()),
                    };
                    let _ = write!(err, "\r\x1b[2K{}", render(&frame));
                    let _ = err.flush();
                    std::thread::sleep(EVERY);
                }
                let _ = write!(err, "\r\x1b[2K");
                let _ = err.flush();
            })
            .ok();
        Progress { stop, handle }
    }

    /// Clears the line and stops drawing.
    pub fn finish(mut self) {
        self.stop.store(true, Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_shows_every_counter() {
        let live = LiveSnapshot {
            done: 10,
            planned: Some(40),
            status: tpscope_model::StatusCounts {
                ok: 9,
                error: 1,
                cancelled: 0,
            },
            tokens: 2000,
            elapsed_s: Some(4.0),
            in_flight: 8,
            queue_depth: 22,
            cap: Some(8),
            gap_fraction: Some(0.004),
            label: "concurrency 8".into(),
            lagging: None,
        };
        let mut f = Frame {
            live,
            streamed_tokens: None,
            silent_for: Duration::ZERO,
        };
        assert_eq!(
            render(&f),
            "concurrency 8  10/40 done  4s  500 tok/s  in flight 8/8  queue 22  gap 0.4%  errors 1"
        );
        // Tokens of streams still running count, and silence is flagged.
        f.streamed_tokens = Some(3000);
        f.silent_for = Duration::from_secs(12);
        assert_eq!(
            render(&f),
            "concurrency 8  10/40 done  4s  750 tok/s  in flight 8/8  queue 22  gap 0.4%  \
             SILENT 12s: no bytes from any of 8 streams  errors 1"
        );
        f.live.in_flight = 0;
        assert!(
            !render(&f).contains("SILENT"),
            "nothing in flight is not silence"
        );
    }
}
