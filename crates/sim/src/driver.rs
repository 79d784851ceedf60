//! The engine thread: receives requests, runs [`Engine`] steps, paces them in time
//! (sleeping to absolute deadlines with a short spin at the end, or not at all at
//! `--speed max`), hands each token to its connection, and keeps the metrics.
//!
//! Simulated time advances by each step's duration. At real-time and scaled
//! speeds an idle engine's simulated clock follows the wall clock (× the factor),
//! so queue and latency figures match what a client sees; at `max` idle time does
//! not exist.

use std::sync::mpsc::{Receiver, TryRecvError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::app::{Cmd, Submission};
use crate::config::SimConfig;
use crate::engine::{Engine, Event, Limits, SeqSpec};
use crate::handoff::SeqShared;
use crate::metrics::{FinishedReason, Lateness, Metrics};
use crate::roofline::Roofline;
use crate::sync::lock;

/// How long before a deadline the thread stops sleeping and spins: the OS timer
/// wakes up to ~100 µs late (timer slack plus scheduling), the spin absorbs that.
const SPIN: Duration = Duration::from_micros(250);

/// A deadline further behind than this is abandoned (no catching up: a real GPU
/// does not run faster after a hiccup of the host), unless the configuration
/// keeps the schedule (runs compared with each other on a loaded machine).
const MAX_BEHIND: Duration = Duration::from_millis(5);

struct SeqData {
    shared: Arc<SeqShared>,
    prompt_tokens: u32,
    capped: bool,
    arrival: f64,
    last_token: f64,
}

/// The engine thread's state.
pub(crate) struct Driver {
    engine: Engine<SeqData>,
    rx: Receiver<Cmd>,
    metrics: Arc<Mutex<Metrics>>,
    lateness: Arc<Mutex<Lateness>>,
    factor: Option<f64>,
    /// Whether a deadline far behind is caught up rather than abandoned.
    keep_schedule: bool,
    anchor: Instant,
    /// Simulated seconds since the anchor.
    sim_now: f64,
    deadline: Instant,
    shutdown: bool,
}

impl Driver {
    pub(crate) fn new(
        cfg: &SimConfig,
        rx: Receiver<Cmd>,
        metrics: Arc<Mutex<Metrics>>,
        lateness: Arc<Mutex<Lateness>>,
    ) -> Self {
        let limits = Limits {
            max_num_seqs: cfg.max_num_seqs as usize,
            max_num_batched_tokens: cfg.max_num_batched_tokens,
            num_blocks: cfg.kv_blocks(),
        };
        let now = Instant::now();
        Driver {
            engine: {
                let e = Engine::new(limits, Roofline::new(cfg));
                if cfg.prefix_caching {
                    e.with_prefix_cache()
                } else {
                    e
                }
            },
            rx,
            metrics,
            lateness,
            factor: cfg.speed.factor(),
            keep_schedule: cfg.keep_schedule,
            anchor: now,
            sim_now: 0.0,
            deadline: now,
            shutdown: false,
        }
    }

    fn wall_sim(&self, t: Instant) -> f64 {
        match self.factor {
            Some(f) => t.saturating_duration_since(self.anchor).as_secs_f64() * f,
            None => self.sim_now,
        }
    }

    fn handle(&mut self, cmd: Cmd) {
        match cmd {
            Cmd::Submit(s) => self.submit(*s),
            Cmd::Abort(id) => {
                if let Some(d) = self.engine.abort(id) {
                    d.shared.abort();
                    lock(&self.metrics).success[FinishedReason::Abort as usize] += 1;
                }
            }
            Cmd::Shutdown => self.shutdown = true,
        }
    }

    fn submit(&mut self, s: Submission) {
        let arrival = self.wall_sim(s.arrived).min(self.sim_now);
        self.engine.add_hashed(
            SeqSpec {
                id: s.index,
                prompt_tokens: s.prompt_tokens,
                output_tokens: s.output_tokens,
            },
            SeqData {
                shared: s.shared,
                prompt_tokens: s.prompt_tokens,
                capped: s.capped,
                arrival,
                last_token: arrival,
            },
            s.block_hashes,
        );
    }

    /// Drains the queue without blocking; blocks for one command when `block`.
    fn receive(&mut self, block: bool) {
        if block {
            match self.rx.recv() {
                Ok(cmd) => {
                    // Idle until now: the simulated clock catches up with the wall.
                    let now = Instant::now();
                    self.sim_now = self.sim_now.max(self.wall_sim(now));
                    self.deadline = now;
                    self.handle(cmd);
                }
                Err(_) => {
                    self.shutdown = true;
                    return;
                }
            }
        }
        loop {
            match self.rx.try_recv() {
                Ok(cmd) => self.handle(cmd),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    self.shutdown = true;
                    break;
                }
            }
        }
    }

    /// Runs until shutdown (or until every sender is gone).
    pub(crate) fn run(mut self) {
        // `step` may consume the shutdown command itself: check before blocking on
        // the idle queue again, or an idle engine would wait forever.
        while !self.shutdown {
            self.receive(self.engine.is_idle());
            if self.shutdown {
                break;
            }
            self.step();
        }
        for d in self.engine.drain() {
            d.shared.abort();
        }
        self.publish_gauges();
    }

    fn step(&mut self) {
        let sim_start = self.sim_now;
        let plan = {
            let mut m = lock(&self.metrics);
            self.engine.schedule(&mut |d: &mut SeqData, ev| {
                if ev == Event::FirstScheduled {
                    m.queue.observe((sim_start - d.arrival).max(0.0));
                    m.prompt_tokens += u64::from(d.prompt_tokens);
                }
            })
        };
        let Some(plan) = plan else {
            // Nothing can run (cannot happen with a validated configuration, since
            // one max-length sequence always fits): wait for the next command.
            self.receive(true);
            return;
        };
        if let Some(f) = self.factor {
            let step = plan.duration.div_f64(f);
            self.deadline += step;
            let now = Instant::now();
            if !self.keep_schedule && self.deadline + MAX_BEHIND < now {
                self.deadline = now;
            }
            let late = sleep_until(self.deadline);
            lock(&self.lateness).record(late);
        }
        self.sim_now += plan.duration.as_secs_f64();
        let end = self.sim_now;
        {
            let mut m = lock(&self.metrics);
            let m = &mut *m;
            self.engine.complete(&mut |d: &mut SeqData, ev| {
                if let Event::Token { count, finished } = ev {
                    d.shared.token(count, finished);
                    m.generation_tokens += 1;
                    if count == 1 {
                        m.ttft.observe(end - d.arrival);
                    } else {
                        m.itl.observe(end - d.last_token);
                    }
                    d.last_token = end;
                    if finished {
                        m.e2e.observe(end - d.arrival);
                        let r = if d.capped {
                            FinishedReason::Length
                        } else {
                            FinishedReason::Stop
                        };
                        m.success[r as usize] += 1;
                    }
                }
            });
        }
        self.publish_gauges();
    }

    fn publish_gauges(&self) {
        let mut m = lock(&self.metrics);
        m.running = self.engine.num_running() as u64;
        m.waiting = self.engine.num_waiting() as u64;
        m.kv_usage = self.engine.used_blocks() as f64 / self.engine.total_blocks().max(1) as f64;
        m.preemptions = self.engine.preemptions();
        if let Some(c) = self.engine.prefix_cache() {
            m.prefix_cache_queries = c.queries();
            m.prefix_cache_hits = c.hits();
        }
    }
}

/// Sleeps until `deadline` (OS sleep, then a spin for the last [`SPIN`]); returns
/// how late it woke.
fn sleep_until(deadline: Instant) -> Duration {
    let now = Instant::now();
    if deadline > now {
        let left = deadline - now;
        if left > SPIN {
            std::thread::sleep(left - SPIN);
        }
        while Instant::now() < deadline {
            std::hint::spin_loop();
        }
    }
    Instant::now().saturating_duration_since(deadline)
}
