//! The live progress line of `tpscope bench`: one line on stderr, redrawn a few
//! times a second, only when stderr is a terminal and `--quiet` is not given. It
//! reads the recorder's live counters; it never owns a measurement.

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::thread::JoinHandle;
use std::time::Duration;

use tpscope_record::{LiveSnapshot, LiveStats};

/// How often the line is redrawn.
const EVERY: Duration = Duration::from_millis(250);

/// A running progress line (a no-op when not drawing).
pub struct Progress {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

/// Whether a progress line would be drawn: stderr is a terminal and not quiet.
pub fn wanted(quiet: bool) -> bool {
    !quiet && std::io::stderr().is_terminal()
}

/// One frame: `label  done/total  TPS  in-flight/cap  queue  gap  errors`.
pub fn render(s: &LiveSnapshot) -> String {
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
            line.push_str(&format!("  {:.0} tok/s", s.tokens as f64 / e));
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
    if s.error > 0 {
        line.push_str(&format!("  errors {}", s.error));
    }
    if s.cancelled > 0 {
        line.push_str(&format!("  cancelled {}", s.cancelled));
    }
    if let Some(w) = &s.lagging {
        line.push_str("  ");
        line.push_str(w);
    }
    line
}

impl Progress {
    /// Starts drawing `live` on stderr if [`wanted`]; otherwise does nothing.
    pub fn start(live: Arc<LiveStats>, quiet: bool) -> Progress {
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
                    let _ = write!(err, "\r\x1b[2K{}", render(&live.snapshot()));
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
        let s = LiveSnapshot {
            done: 10,
            planned: Some(40),
            ok: 9,
            error: 1,
            cancelled: 0,
            tokens: 2000,
            elapsed_s: Some(4.0),
            in_flight: 8,
            queue_depth: 22,
            cap: Some(8),
            gap_fraction: Some(0.004),
            label: "concurrency 8".into(),
            lagging: None,
        };
        assert_eq!(
            render(&s),
            "concurrency 8  10/40 done  4s  500 tok/s  in flight 8/8  queue 22  gap 0.4%  errors 1"
        );
    }
}
