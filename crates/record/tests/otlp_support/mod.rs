//! A loopback OTLP/HTTP receiver for the export tests (the recorder's here, the
//! bench's and the proxy's in the CLI's tests): it keeps every request's path,
//! headers and body, answers 200 (or, slow, after a delay), and stops when
//! dropped. A closed port for the dead collector.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// One request the receiver got.
#[derive(Clone, Debug)]
pub struct Got {
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// A receiver on 127.0.0.1 (port 0).
pub struct Receiver {
    pub url: String,
    got: Arc<Mutex<Vec<Got>>>,
    stop: Arc<AtomicBool>,
    addr: std::net::SocketAddr,
    handle: Option<JoinHandle<()>>,
}

impl Receiver {
    /// Answers each request at once.
    pub fn start() -> Receiver {
        Receiver::with_delay(Duration::ZERO)
    }

    /// Answers each request after `delay` (a slow collector).
    pub fn with_delay(delay: Duration) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let got = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (g, s) = (got.clone(), stop.clone());
        let handle = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.load(Relaxed) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let g = g.clone();
                // Each connection on its own thread: a slow answer holds only it.
                std::thread::spawn(move || serve(conn, &g, delay));
            }
        });
        Receiver {
            url: format!("http://{addr}"),
            got,
            stop,
            addr,
            handle: Some(handle),
        }
    }

    /// What arrived so far.
    pub fn got(&self) -> Vec<Got> {
        self.got.lock().unwrap().clone()
    }

    /// The bodies, one per line (as the Collector's file exporter writes them).
    pub fn bodies_as_lines(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for g in self.got() {
            out.extend_from_slice(&g.body);
            out.push(b'\n');
        }
        out
    }

    /// Every span of every body, as JSON.
    pub fn spans(&self) -> Vec<serde_json::Value> {
        self.got()
            .iter()
            .flat_map(|g| {
                let doc: serde_json::Value = serde_json::from_slice(&g.body).unwrap();
                doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
                    .as_array()
                    .unwrap()
                    .clone()
            })
            .collect()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
        let _ = TcpStream::connect(self.addr);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn serve(conn: TcpStream, got: &Mutex<Vec<Got>>, delay: Duration) {
    let mut r = BufReader::new(conn.try_clone().unwrap());
    let mut line = String::new();
    if r.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let path = line.split(' ').nth(1).unwrap_or("").to_string();
    let mut headers = Vec::new();
    let mut len = 0usize;
    loop {
        let mut h = String::new();
        if r.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
            break;
        }
        if let Some((k, v)) = h.trim_end().split_once(':') {
            let (k, v) = (k.trim().to_ascii_lowercase(), v.trim().to_string());
            if k == "content-length" {
                len = v.parse().unwrap();
            }
            headers.push((k, v));
        }
    }
    let mut body = vec![0; len];
    if r.read_exact(&mut body).is_err() {
        return;
    }
    std::thread::sleep(delay);
    got.lock().unwrap().push(Got {
        path,
        headers,
        body,
    });
    let mut w = conn;
    let _ = w.write_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
    );
}

/// A URL on 127.0.0.1 where nothing listens (a dead collector).
pub fn closed_port() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    drop(l);
    format!("http://{addr}")
}
