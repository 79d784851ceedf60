//! A pooled client that forwards arbitrary requests (the proxy's upstream side):
//! tpscope's own connector (TCP, TLS with rustls + ring and ALPN, the connect
//! timeout) under hyper-util's pool, so the proxy does not open connections a
//! second way. Failures without a response head map to causes as the bench's.

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use tpscope_model::Cause;

use crate::client::{ClientError, transport_failure};
use crate::config::ClientConfig;
use crate::connector::Connector;

/// The body of a forwarded request: whatever the proxy's client sent, possibly
/// wrapped (a size limit).
pub type ForwardBody = BoxBody<Bytes, Box<dyn std::error::Error + Send + Sync>>;

/// Forwards requests to one upstream over pooled connections.
#[derive(Clone)]
pub struct Forwarder {
    http: HyperClient<Connector, ForwardBody>,
}

impl Forwarder {
    /// A forwarder for `https` or plain HTTP upstreams, with `config`'s connect
    /// timeout, pool, TLS roots and HTTP/2 settings (kernel receive stamps off).
    pub fn new(https: bool, config: &ClientConfig) -> Result<Forwarder, ClientError> {
        let connector = Connector::of_config(https, config, crate::config::RxTimestamps::User)?;
        let mut builder = HyperClient::builder(TokioExecutor::new());
        builder
            .pool_timer(TokioTimer::new())
            .timer(TokioTimer::new())
            .pool_idle_timeout(config.pool_idle_timeout)
            .pool_max_idle_per_host(config.pool_max_idle_per_host)
            // The proxy's upstream side is a stream's reader too: the same cap,
            // so a client that falls behind costs 64 KB here, not ~400 KB.
            .http1_max_buf_size(crate::client::MAX_READ_BUF)
            .http2_only(config.http2_prior_knowledge);
        Ok(Forwarder {
            http: builder.build(connector),
        })
    }

    /// Sends `req` (an absolute URI); the response head, or the cause and
    /// message of why none came (`connect`, `timeout_connect`, …).
    pub async fn send(
        &self,
        req: Request<ForwardBody>,
    ) -> Result<Response<Incoming>, (Cause, String, hyper_util::client::legacy::Error)> {
        self.http.request(req).await.map_err(|e| {
            let (cause, msg) = transport_failure(&e);
            (cause, msg, e)
        })
    }
}
