//! `tpscope-sim`: a simulated continuous-batching inference server with an
//! OpenAI-compatible API (docs/design.md §10). [`start`] serves it on a socket and
//! returns a [`SimHandle`]; [`SimConfig`] holds every knob.
//!
//! The engine ([`engine`]) and the step-time model ([`roofline`]) are pure; the
//! HTTP layer and the engine thread are the only parts that do I/O.
#![warn(missing_docs)]

mod api_error;
mod app;
pub mod config;
pub mod draws;
mod driver;
pub mod engine;
mod error;
mod handoff;
mod listen;
mod metrics;
pub mod prefix_cache;
mod request;
mod responses;
pub mod roofline;
mod server;
mod stream;
mod sync;
mod truth;

use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

pub use config::{
    BLOCK_SIZE, ConfigError, Faults, GpuSpec, Invalid, KNOBS, Knob, KnobKind, KnobValue, ModelSpec,
    OutputLen, SimConfig, SimOverrides, Speed,
};
pub use draws::Fault;
pub use error::SimError;
pub use listen::{LISTEN_BACKLOG, accept_queue};
pub use metrics::StepLateness;
pub use roofline::{Roofline, StepWork, explain, explain_config};

use app::{App, Cmd};
use metrics::{Lateness, Metrics};
use sync::lock;
use tpscope_model::RunClock;
use truth::TruthLog;

/// A running simulator. Stop it with [`SimHandle::shutdown`] (dropping it also stops
/// serving, without waiting and without flushing the truth log).
pub struct SimHandle {
    addr: SocketAddr,
    app: Arc<App>,
    lateness: Arc<Mutex<Lateness>>,
    stop_server: Option<tokio::sync::oneshot::Sender<()>>,
    server: Option<tokio::task::JoinHandle<()>>,
    engine: Option<std::thread::JoinHandle<()>>,
    truth: Option<TruthLog>,
}

/// Starts the simulator on `addr` (port 0 picks a free port): validates the
/// configuration, loads the tokenizer, opens the truth log, starts the engine
/// thread and serves HTTP on the current Tokio runtime.
pub async fn start(config: SimConfig, addr: SocketAddr) -> Result<SimHandle, SimError> {
    config.validate()?;
    let tok = config.tokenizer;
    tokio::task::spawn_blocking(move || tok.warm())
        .await
        .map_err(|error| SimError::Join {
            what: "loading the tokenizer failed",
            error,
        })?;
    let truth = match &config.truth_log {
        Some(p) => Some(TruthLog::create(p)?),
        None => None,
    };
    let listener = listen::bind(addr).map_err(|source| SimError::Bind { addr, source })?;
    let local = listener
        .local_addr()
        .map_err(|source| SimError::Bind { addr, source })?;

    let metrics = Arc::new(Mutex::new(Metrics::new()));
    let lateness = Arc::new(Mutex::new(Lateness::new()));
    let (tx, rx) = mpsc::channel();
    let driver = driver::Driver::new(&config, rx, metrics.clone(), lateness.clone());
    let engine = std::thread::Builder::new()
        .name("tpscope-sim-engine".into())
        .spawn(move || driver.run())
        .map_err(|source| SimError::Io {
            what: "starting the engine thread".into(),
            source,
        })?;

    let model_name = config.model_name();
    let model_json = serde_json::to_string(&model_name).unwrap_or_else(|_| "\"sim\"".into());
    let clock = RunClock::start();
    let created = clock.anchor_wall().unix_nanos().max(0) as u64 / 1_000_000_000;
    let app = Arc::new(App {
        config,
        model_name,
        model_json,
        clock,
        created,
        next_index: AtomicU64::new(0),
        eos_seen: Default::default(),
        engine: Mutex::new(Some(tx)),
        metrics,
        truth: Mutex::new(truth.as_ref().map(TruthLog::sender)),
    });
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let router = server::router(app.clone());
    let head_timeout = app.config.header_read_timeout;
    let server = tokio::spawn(listen::serve(listener, router, head_timeout, async move {
        let _ = stop_rx.await;
    }));
    Ok(SimHandle {
        addr: local,
        app,
        lateness,
        stop_server: Some(stop_tx),
        server: Some(server),
        engine: Some(engine),
        truth,
    })
}

impl SimHandle {
    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The OpenAI base URL, e.g. `http://127.0.0.1:8000/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The one model `/v1/models` lists and requests must name.
    pub fn model_name(&self) -> &str {
        &self.app.model_name
    }

    /// The configuration it runs with.
    pub fn config(&self) -> &SimConfig {
        &self.app.config
    }

    /// How late the engine woke for its step deadlines so far.
    pub fn step_lateness(&self) -> StepLateness {
        lock(&self.lateness).summary()
    }

    /// Stops serving: no new connections, every unfinished response ends (streams
    /// are cut), the engine thread stops, and the truth log is flushed and closed.
    pub async fn shutdown(mut self) -> Result<(), SimError> {
        if let Some(tx) = self.stop_server.take() {
            let _ = tx.send(());
        }
        self.app.send(Cmd::Shutdown);
        let engine = self.engine.take();
        let joined = tokio::task::spawn_blocking(move || engine.map(|e| e.join()))
            .await
            .map_err(|error| SimError::Join {
                what: "waiting for the engine",
                error,
            })?;
        if let Some(Err(_)) = joined {
            return Err(SimError::Panicked { thread: "engine" });
        }
        if let Some(mut server) = self.server.take() {
            // Aborted responses end at once; give connections a moment to close.
            if tokio::time::timeout(Duration::from_secs(5), &mut server)
                .await
                .is_err()
            {
                server.abort();
            }
        }
        lock(&self.app.engine).take();
        lock(&self.app.truth).take();
        if let Some(t) = self.truth.take() {
            tokio::task::spawn_blocking(move || t.finish())
                .await
                .map_err(|error| SimError::Join {
                    what: "waiting for the truth log",
                    error,
                })??;
        }
        Ok(())
    }
}

impl Drop for SimHandle {
    fn drop(&mut self) {
        if let Some(tx) = self.stop_server.take() {
            let _ = tx.send(());
        }
        self.app.send(Cmd::Shutdown);
        if let Some(s) = self.server.take() {
            s.abort();
        }
    }
}

/// Raises the soft open-files limit to the hard limit (each connection is a file
/// descriptor; 1,000 concurrent streams need more than the usual 1,024) and
/// sizes this process's descriptor table for that many, up to
/// [`FD_TABLE_RESERVE`], at once ([`reserve_fd_table`]). Returns the new soft
/// limit.
pub fn raise_nofile_limit() -> std::io::Result<u64> {
    let limit = raise_soft_nofile()?;
    let _ = reserve_fd_table(limit.min(FD_TABLE_RESERVE as u64) as usize);
    Ok(limit)
}

/// Descriptors [`raise_nofile_limit`] makes room for at once: 65,536 (a table
/// of 512 KiB of kernel memory).
pub const FD_TABLE_RESERVE: usize = 65_536;

/// Grows this process's descriptor table to hold `n` descriptors now, so that
/// opening sockets later never grows it. Linux doubles the table when a new
/// descriptor does not fit, and in a process of several threads each growth
/// waits for an RCU grace period with every other opener of the process
/// blocked behind it: the proxy's serving threads stalled 12–22 ms in
/// `socket()` and `accept()` at each doubling of a 1,000-stream ramp
/// (`expand_files`; the relay bench: 1 % of requests reached the upstream
/// 10 ms late, where nginx's single-threaded workers never wait). Best made
/// before the process starts its threads, when growing costs no wait at all.
/// The table never shrinks; `/proc/self/status` gives its size (`FDSize`).
pub fn reserve_fd_table(n: usize) -> std::io::Result<()> {
    let Some(highest) = n.checked_sub(1).and_then(|h| libc::c_int::try_from(h).ok()) else {
        return Ok(());
    };
    let null = std::fs::File::open("/dev/null")?;
    // SAFETY: F_DUPFD_CLOEXEC duplicates an open descriptor this function owns
    // onto the lowest free number at or above `highest`; the copy is closed
    // at once, and only the table's size remains.
    unsafe {
        let copy = libc::fcntl(
            std::os::fd::AsRawFd::as_raw_fd(&null),
            libc::F_DUPFD_CLOEXEC,
            highest,
        );
        if copy < 0 {
            return Err(std::io::Error::last_os_error());
        }
        libc::close(copy);
    }
    Ok(())
}

/// Raises the soft open-files limit to the hard limit; the new soft limit.
fn raise_soft_nofile() -> std::io::Result<u64> {
    // SAFETY: getrlimit/setrlimit only read/write the struct we pass.
    unsafe {
        let mut r = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if r.rlim_cur < r.rlim_max {
            r.rlim_cur = r.rlim_max;
            if libc::setrlimit(libc::RLIMIT_NOFILE, &r) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        // rlim_t is u64 on 64-bit Linux but not everywhere.
        #[allow(clippy::unnecessary_cast)]
        Ok(r.rlim_cur as u64)
    }
}
