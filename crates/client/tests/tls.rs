//! HTTPS with rustls (ring): a test CA given as an extra root, HTTP/2 chosen by
//! ALPN when offered (HTTP/1.1 otherwise), and connection reuse over HTTP/2.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper::{Request, Response, Version};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio_util::sync::CancellationToken;
use tpscope_client::{Api, Client, ClientConfig, Endpoint, Prompt, RequestSpec};
use tpscope_model::{Cause, RunClock};

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!(
        "{}/tests/fixtures/tls/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

const STREAM: &str = "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"secure\"}}]}\n\ndata: [DONE]\n\n";

struct TlsServer {
    port: u16,
    versions: Arc<Mutex<Vec<Version>>>,
    connections: Arc<Mutex<usize>>,
    task: tokio::task::JoinHandle<()>,
}

async fn start_tls_server() -> TlsServer {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![fixture("leaf.der").into()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(fixture("leaf.key.der").into()),
        )
        .unwrap();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let versions = Arc::new(Mutex::new(Vec::new()));
    let connections = Arc::new(Mutex::new(0));
    let task = {
        let (versions, connections) = (versions.clone(), connections.clone());
        tokio::spawn(async move {
            let mut conns = tokio::task::JoinSet::new();
            while let Ok((tcp, _)) = listener.accept().await {
                *connections.lock().unwrap() += 1;
                let acceptor = acceptor.clone();
                let versions = versions.clone();
                conns.spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
                    let svc = service_fn(move |req: Request<hyper::body::Incoming>| {
                        versions.lock().unwrap().push(req.version());
                        async move {
                            Ok::<_, Infallible>(
                                Response::builder()
                                    .header("content-type", "text/event-stream")
                                    .body(Full::new(Bytes::from_static(STREAM.as_bytes())))
                                    .unwrap(),
                            )
                        }
                    });
                    let io = TokioIo::new(tls);
                    if h2 {
                        let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                            .serve_connection(io, svc)
                            .await;
                    } else {
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(io, svc)
                            .await;
                    }
                });
            }
        })
    };
    TlsServer {
        port,
        versions,
        connections,
        task,
    }
}

fn client(port: u16, http2: bool, trust: bool) -> Client {
    let config = ClientConfig {
        http2,
        extra_root_certs_der: if trust {
            vec![fixture("ca.der")]
        } else {
            Vec::new()
        },
        ..ClientConfig::default()
    };
    Client::new(
        Endpoint::new(format!("https://localhost:{port}/v1"), Api::Chat, "m"),
        config,
    )
    .unwrap()
}

fn spec() -> RequestSpec {
    RequestSpec {
        prompt: Prompt::Text("hi".into()),
        max_tokens: Some(1),
    }
}

#[tokio::test]
async fn https_negotiates_http2_and_reuses_its_connection() {
    let server = start_tls_server().await;
    let c = client(server.port, true, true);
    let clock = RunClock::start();
    let cancel = CancellationToken::new();
    let first = c.attempt(&spec(), &clock, &cancel).await;
    assert!(first.is_ok(), "{first:?}");
    assert_eq!(first.text, "secure");
    assert_eq!(first.attempt.connection_reused, Some(false));
    assert!(first.attempt.connect_time.is_some(), "TCP + TLS time");
    let second = c.attempt(&spec(), &clock, &cancel).await;
    assert!(second.is_ok(), "{second:?}");
    assert_eq!(second.attempt.connection_reused, Some(true));
    assert_eq!(second.attempt.connect_time, None);
    // Two at once share the one HTTP/2 connection.
    let s = spec();
    let (a, b) = tokio::join!(
        c.attempt(&s, &clock, &cancel),
        c.attempt(&s, &clock, &cancel)
    );
    assert!(a.is_ok() && b.is_ok());
    assert_eq!(a.connection_id, first.connection_id);
    assert_eq!(b.connection_id, first.connection_id);
    assert_eq!(*server.connections.lock().unwrap(), 1);
    assert!(
        server
            .versions
            .lock()
            .unwrap()
            .iter()
            .all(|v| *v == Version::HTTP_2)
    );
    server.task.abort();
}

#[tokio::test]
async fn https_without_http2_speaks_http1() {
    let server = start_tls_server().await;
    let c = client(server.port, false, true);
    let o = c
        .attempt(&spec(), &RunClock::start(), &CancellationToken::new())
        .await;
    assert!(o.is_ok(), "{o:?}");
    assert_eq!(
        server.versions.lock().unwrap().as_slice(),
        [Version::HTTP_11]
    );
    server.task.abort();
}

#[tokio::test]
async fn an_untrusted_certificate_is_a_connect_failure() {
    let server = start_tls_server().await;
    let c = client(server.port, true, false);
    let o = c
        .attempt(&spec(), &RunClock::start(), &CancellationToken::new())
        .await;
    assert_eq!(o.cause(), Some(Cause::Connect), "{o:?}");
    let msg = o.error_message.unwrap();
    assert!(msg.contains("TLS"), "{msg}");
    server.task.abort();
}
