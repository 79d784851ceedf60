//! The OTLP exporter (docs/otlp.md): every span the writer thread writes is also
//! offered to a bounded queue, which an exporter thread sends in batches to an
//! OpenTelemetry collector as OTLP/HTTP JSON (`tpscope_log`'s pure encoder) over
//! a small blocking HTTP/1.1 client (no async runtime). The log never waits for
//! it: a full queue, a dead or slow collector, or a batch still unsent when the
//! run closes drops spans from the export only, each counted with its cause
//! ([`ExportStats`]).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tpscope_log::import::otlp_encode::encode;
use tpscope_model::{RunRecord, Span};

/// Why an OTLP endpoint or header was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadOtlp(String);

/// Where and how spans are exported.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OtlpConfig {
    host: String,
    port: u16,
    path: String,
    /// Extra request headers (authentication), in order.
    pub headers: Vec<(String, String)>,
    /// The longest one export may take (connect, send, answer); also how long
    /// the close waits for what is still queued.
    pub timeout: Duration,
    /// Spans per batch at most.
    pub batch: usize,
    /// The longest a span waits in a batch before it is sent.
    pub every: Duration,
    /// Spans the queue holds; more are dropped (and counted).
    pub queue: usize,
    /// The resource's `service.name`.
    pub service: String,
}

impl OtlpConfig {
    /// Exports to `endpoint`: a collector's base URL (`http://127.0.0.1:4318`,
    /// POSTs go to its `/v1/traces`) or the full traces URL (`…/v1/traces`).
    pub fn new(endpoint: &str) -> Result<OtlpConfig, BadOtlp> {
        let e = endpoint.trim();
        let rest = match e.split_once("://") {
            Some(("http", rest)) => rest,
            Some(("https", _)) => {
                return Err(BadOtlp(format!(
                    "`{e}`: https is not supported by the built-in exporter; send to a \
                     collector on this host or network over http (e.g. http://127.0.0.1:4318), \
                     which forwards over TLS"
                )));
            }
            _ => {
                return Err(BadOtlp(format!(
                    "`{e}` is not an http:// URL (a collector's OTLP/HTTP endpoint, e.g. \
                     http://127.0.0.1:4318)"
                )));
            }
        };
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) if !p.contains(']') => {
                let port = p.parse().map_err(|_| {
                    BadOtlp(format!("`{e}`: the port `{p}` is not a number up to 65535"))
                })?;
                (h, port)
            }
            _ => (authority, 80),
        };
        if host.is_empty() || authority.contains('@') {
            return Err(BadOtlp(format!(
                "`{e}`: expected http://HOST[:PORT][/PATH] (credentials go in --otlp-header)"
            )));
        }
        let base = path
            .split(['?', '#'])
            .next()
            .unwrap_or("")
            .trim_end_matches('/');
        let path = if base.ends_with("/v1/traces") {
            base.to_string()
        } else {
            format!("{base}/v1/traces")
        };
        Ok(OtlpConfig {
            host: host.trim_start_matches('[').trim_end_matches(']').into(),
            port,
            path,
            headers: Vec::new(),
            timeout: Duration::from_secs(5),
            batch: 512,
            every: Duration::from_secs(1),
            queue: 8192,
            service: "tpscope".into(),
        })
    }

    /// With a request header given as `NAME=VALUE` (e.g. `authorization=Bearer …`).
    pub fn header(mut self, kv: &str) -> Result<OtlpConfig, BadOtlp> {
        self.headers.push(parse_header(kv)?);
        Ok(self)
    }

    /// The URL spans are POSTed to.
    pub fn url(&self) -> String {
        format!("http://{}{}", self.authority(), self.path)
    }

    /// `host:port`, an IPv6 host in brackets (the `Host` header's form).
    fn authority(&self) -> String {
        match self.host.contains(':') {
            true => format!("[{}]:{}", self.host, self.port),
            false => format!("{}:{}", self.host, self.port),
        }
    }
}

/// A header given as `NAME=VALUE`: a valid HTTP name, a value without control
/// characters (which would end the header early).
pub fn parse_header(kv: &str) -> Result<(String, String), BadOtlp> {
    let (k, v) = kv
        .split_once('=')
        .ok_or_else(|| BadOtlp(format!("`{kv}` is not NAME=VALUE")))?;
    let k = k.trim();
    let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    if k.is_empty() || !k.chars().all(token) {
        return Err(BadOtlp(format!("`{k}` is not an HTTP header name")));
    }
    if v.chars().any(|c| c.is_control()) {
        return Err(BadOtlp(format!(
            "the value of `{k}` holds a control character"
        )));
    }
    Ok((k.to_string(), v.trim().to_string()))
}

/// What the exporter did: spans sent, and spans not sent by cause. Final once the
/// writer that owns the exporter has finished.
#[derive(Debug, Default)]
pub struct ExportStats {
    exported: std::sync::atomic::AtomicU64,
    dropped: Mutex<BTreeMap<String, u64>>,
}

impl ExportStats {
    /// Spans the collector accepted.
    pub fn exported(&self) -> u64 {
        self.exported.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Spans not exported (written to the log all the same).
    pub fn not_exported(&self) -> u64 {
        self.lock().values().sum()
    }

    /// `otlp: N spans not exported (cause: n; …)`, when any was not.
    pub fn warning(&self) -> Option<String> {
        let d = self.lock();
        let n: u64 = d.values().sum();
        (n > 0).then(|| {
            let causes: Vec<String> = d.iter().map(|(c, k)| format!("{c}: {k}")).collect();
            format!("otlp: {n} spans not exported ({})", causes.join("; "))
        })
    }

    fn drop_spans(&self, n: usize, cause: &str) {
        *self.lock().entry(cause.to_string()).or_default() += n as u64;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, u64>> {
        self.dropped.lock().unwrap_or_else(|e| e.into_inner())
    }
}

const QUEUE_FULL: &str = "the export queue was full (the collector is slower than the run)";
const AT_CLOSE: &str = "still queued when the run closed";

type Item = (Option<Arc<RunRecord>>, Box<Span>);

/// The writer thread's end of the export queue.
pub(crate) struct ExportTx {
    tx: SyncSender<Item>,
    stats: Arc<ExportStats>,
}

impl ExportTx {
    /// Offers a written span to the exporter; never waits.
    pub(crate) fn offer(&self, run: Option<Arc<RunRecord>>, span: &Span) {
        match self.tx.try_send((run, Box::new(span.clone()))) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => self.stats.drop_spans(1, QUEUE_FULL),
            Err(TrySendError::Disconnected(_)) => self.stats.drop_spans(1, "the exporter stopped"),
        }
    }
}

/// The exporter thread.
pub(crate) struct Exporter {
    handle: Option<JoinHandle<()>>,
    /// Set when the run closes: what is unsent after it is dropped.
    close_by: Arc<OnceLock<Instant>>,
    timeout: Duration,
    stats: Arc<ExportStats>,
}

impl Exporter {
    /// Starts the exporter thread; the queue's sending end goes to the writer.
    pub(crate) fn start(cfg: OtlpConfig) -> (Exporter, ExportTx) {
        let (tx, rx) = mpsc::sync_channel(cfg.queue.max(1));
        let stats = Arc::new(ExportStats::default());
        let close_by = Arc::new(OnceLock::new());
        let timeout = cfg.timeout;
        let (s, c) = (stats.clone(), close_by.clone());
        let handle = std::thread::Builder::new()
            .name("tpscope-otlp".into())
            .spawn(move || export_loop(cfg, rx, &s, &c))
            .expect("spawn the OTLP exporter thread");
        let ex = Exporter {
            handle: Some(handle),
            close_by,
            timeout,
            stats: stats.clone(),
        };
        (ex, ExportTx { tx, stats })
    }

    /// The counts (final after [`Exporter::finish`]).
    pub(crate) fn stats(&self) -> Arc<ExportStats> {
        self.stats.clone()
    }

    /// Once the writer has dropped its end: sends what is queued for at most the
    /// timeout more, then stops.
    pub(crate) fn finish(&mut self) {
        let _ = self.close_by.set(Instant::now() + self.timeout);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn export_loop(
    cfg: OtlpConfig,
    rx: Receiver<Item>,
    stats: &ExportStats,
    close_by: &OnceLock<Instant>,
) {
    let mut batch: Vec<Item> = Vec::with_capacity(cfg.batch);
    let mut since = Instant::now();
    loop {
        let wait = match batch.is_empty() {
            true => cfg.every,
            false => (since + cfg.every).saturating_duration_since(Instant::now()),
        };
        let done = match rx.recv_timeout(wait) {
            Ok(item) => {
                if batch.is_empty() {
                    since = Instant::now();
                }
                batch.push(item);
                if batch.len() < cfg.batch {
                    continue;
                }
                false
            }
            Err(RecvTimeoutError::Timeout) => false,
            Err(RecvTimeoutError::Disconnected) => true,
        };
        if !batch.is_empty() {
            send(&cfg, &batch, stats, close_by);
            batch.clear();
        }
        if done {
            return;
        }
    }
}

fn send(cfg: &OtlpConfig, batch: &[Item], stats: &ExportStats, close_by: &OnceLock<Instant>) {
    if close_by.get().is_some_and(|t| Instant::now() >= *t) {
        stats.drop_spans(batch.len(), AT_CLOSE);
        return;
    }
    let body = encode(
        batch.iter().map(|(t, s)| (&**s, t.as_deref())),
        &cfg.service,
    );
    match post(cfg, &body) {
        Ok(()) => {
            stats
                .exported
                .fetch_add(batch.len() as u64, std::sync::atomic::Ordering::Relaxed);
        }
        Err(cause) => stats.drop_spans(batch.len(), &cause),
    }
}

/// One POST of an OTLP/JSON body; `Err`: why it was not accepted, in words that
/// group alike failures (no addresses or ports).
fn post(cfg: &OtlpConfig, body: &[u8]) -> Result<(), String> {
    let io = |what: &str, e: std::io::Error| match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
            format!("{what}: no answer within {} s", cfg.timeout.as_secs_f64())
        }
        k => format!("{what}: {k}"),
    };
    let addr = (cfg.host.as_str(), cfg.port)
        .to_socket_addrs()
        .map_err(|e| io("resolving the collector", e))?
        .next()
        .ok_or("resolving the collector: no address")?;
    let mut s = TcpStream::connect_timeout(&addr, cfg.timeout).map_err(|e| io("connecting", e))?;
    s.set_write_timeout(Some(cfg.timeout))
        .and_then(|_| s.set_read_timeout(Some(cfg.timeout)))
        .map_err(|e| io("connecting", e))?;
    let mut head = format!(
        "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\nUser-Agent: tpscope/{}\r\n",
        cfg.path,
        cfg.authority(),
        body.len(),
        env!("CARGO_PKG_VERSION")
    );
    for (k, v) in &cfg.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes())
        .and_then(|_| s.write_all(body))
        .map_err(|e| io("sending", e))?;
    // The status line is all that is needed; read at most a little of the answer.
    let mut got = Vec::with_capacity(256);
    let mut buf = [0u8; 1024];
    while !got.windows(2).any(|w| w == b"\r\n") && got.len() < 16 * 1024 {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) => return Err(io("waiting for the answer", e)),
        }
    }
    let line = String::from_utf8_lossy(&got);
    let code = line
        .strip_prefix("HTTP/1.")
        .and_then(|r| r.get(2..5))
        .and_then(|c| c.parse::<u16>().ok())
        .ok_or("the collector's answer is not HTTP")?;
    match code {
        200..=299 => Ok(()),
        c => Err(format!("the collector answered HTTP {c}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_base_url_posts_to_v1_traces_and_a_full_one_is_kept() {
        let c = OtlpConfig::new("http://127.0.0.1:4318").unwrap();
        assert_eq!(c.url(), "http://127.0.0.1:4318/v1/traces");
        let c = OtlpConfig::new("http://collector/otel/").unwrap();
        assert_eq!(c.url(), "http://collector:80/otel/v1/traces");
        let c = OtlpConfig::new("http://[::1]:4318/v1/traces").unwrap();
        assert_eq!(c.url(), "http://[::1]:4318/v1/traces");
    }

    #[test]
    fn https_and_other_schemes_are_refused_with_the_reason() {
        let e = OtlpConfig::new("https://otel.example.com").unwrap_err();
        assert!(e.to_string().contains("https is not supported"), "{e}");
        let e = OtlpConfig::new("127.0.0.1:4318").unwrap_err();
        assert!(e.to_string().contains("not an http:// URL"), "{e}");
        let e = OtlpConfig::new("http://h:99999").unwrap_err();
        assert!(e.to_string().contains("port"), "{e}");
    }

    #[test]
    fn headers_are_name_equals_value() {
        let c = OtlpConfig::new("http://h:1")
            .unwrap()
            .header("authorization=Bearer a=b")
            .unwrap();
        assert_eq!(c.headers, [("authorization".into(), "Bearer a=b".into())]);
        assert!(
            OtlpConfig::new("http://h:1")
                .unwrap()
                .header("novalue")
                .is_err()
        );
        assert!(
            OtlpConfig::new("http://h:1")
                .unwrap()
                .header("a b=c")
                .is_err()
        );
        assert!(
            OtlpConfig::new("http://h:1")
                .unwrap()
                .header("k=a\r\nx: y")
                .is_err()
        );
    }
}
