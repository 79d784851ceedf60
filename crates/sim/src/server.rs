//! The OpenAI-compatible HTTP surface: routes, request parsing and validation,
//! OpenAI-shaped errors, immediate faults (429/500/503), and the hand-over of each
//! accepted request to the engine thread and back out through a response body.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use bytes::Bytes;
use serde_json::{Value, json};
use tpscope_model::RunClock;
use tpscope_tokens::Tokenizer;

use crate::config::SimConfig;
use crate::draws::{self, Fault};
use crate::metrics::Metrics;
use crate::stream::{
    ChunkFmt, Delivery, Done, Endpoint, OnceBody, SeqShared, SseBody, WaitDone, lock,
};
use crate::truth::TruthRecord;

/// Largest request body accepted (bytes).
const MAX_BODY: usize = 32 * 1024 * 1024;

/// A message to the engine thread.
pub(crate) enum Cmd {
    /// A new request.
    Submit(Box<Submission>),
    /// The client went away (or a cut fault fired): forget the sequence.
    Abort(u64),
    /// Stop: abort everything and end the thread.
    Shutdown,
}

/// A request handed to the engine.
pub(crate) struct Submission {
    pub index: u64,
    pub prompt_tokens: u32,
    pub output_tokens: u32,
    /// Whether the output length is the `max_tokens` cap (finish reason `length`).
    pub capped: bool,
    pub arrived: Instant,
    pub shared: Arc<SeqShared>,
}

/// State shared by every handler and body.
pub(crate) struct App {
    pub config: SimConfig,
    pub model_name: String,
    /// The model name as a JSON string literal (quoted, escaped).
    pub model_json: String,
    pub clock: RunClock,
    pub created: u64,
    pub next_index: AtomicU64,
    pub engine: Mutex<Option<Sender<Cmd>>>,
    pub metrics: Arc<Mutex<Metrics>>,
    pub truth: Mutex<Option<Sender<TruthRecord>>>,
}

impl App {
    /// Sends a command to the engine; false when the engine is gone.
    pub(crate) fn send(&self, cmd: Cmd) -> bool {
        match lock(&self.engine).as_ref() {
            Some(tx) => tx.send(cmd).is_ok(),
            None => false,
        }
    }

    pub(crate) fn record_truth(&self, r: TruthRecord) {
        if let Some(tx) = lock(&self.truth).as_ref() {
            let _ = tx.send(r);
        }
    }
}

/// The router of the simulator.
pub(crate) fn router(app: Arc<App>) -> Router {
    let close = app.config.connection_close;
    let r = Router::new()
        .route("/v1/models", get(models))
        .route("/v1/chat/completions", post(chat))
        .route("/v1/completions", post(completions))
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .fallback(not_found)
        .with_state(app);
    if close {
        r.layer(axum::middleware::map_response(add_connection_close))
    } else {
        r
    }
}

async fn add_connection_close(mut r: Response) -> Response {
    r.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    r
}

/// An error in OpenAI's shape: `{"error": {message, type, param, code}}`.
#[derive(Debug)]
pub(crate) struct ApiError {
    status: StatusCode,
    message: String,
    kind: &'static str,
    param: Option<&'static str>,
    code: Option<&'static str>,
    retry_after: Option<u64>,
}

impl ApiError {
    fn bad_request(message: impl Into<String>, param: Option<&'static str>) -> Self {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            message: message.into(),
            kind: "invalid_request_error",
            param,
            code: None,
            retry_after: None,
        }
    }

    fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
            kind,
            param: None,
            code: None,
            retry_after: None,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({
            "error": {
                "message": self.message,
                "type": self.kind,
                "param": self.param,
                "code": self.code,
            }
        });
        let mut r = (self.status, axum::Json(body)).into_response();
        if let Some(s) = self.retry_after {
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(s));
        }
        r
    }
}

async fn not_found(req: Request) -> ApiError {
    ApiError {
        code: Some("not_found"),
        ..ApiError::new(
            StatusCode::NOT_FOUND,
            "invalid_request_error",
            format!("no route for {} {}", req.method(), req.uri().path()),
        )
    }
}

async fn health() -> StatusCode {
    StatusCode::OK
}

async fn metrics(State(app): State<Arc<App>>) -> Response {
    let text = lock(&app.metrics).render(&app.model_name);
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

async fn models(State(app): State<Arc<App>>) -> Response {
    axum::Json(json!({
        "object": "list",
        "data": [{
            "id": app.model_name,
            "object": "model",
            "created": app.created,
            "owned_by": "tpscope",
            "root": app.model_name,
            "max_model_len": app.config.model.max_model_len,
        }]
    }))
    .into_response()
}

async fn chat(State(app): State<Arc<App>>, req: Request) -> Response {
    completion(app, Endpoint::Chat, req).await
}

async fn completions(State(app): State<Arc<App>>, req: Request) -> Response {
    completion(app, Endpoint::Completions, req).await
}

/// A parsed, validated completion request.
#[derive(Debug)]
struct Parsed {
    model: String,
    prompt_tokens: u32,
    stream: bool,
    include_usage: bool,
    max_tokens: Option<u32>,
    ignore_eos: bool,
}

fn field_u32(v: &Value, name: &'static str) -> Result<Option<u32>, ApiError> {
    match v.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(x) => match x.as_u64() {
            Some(n) if (1..=u64::from(u32::MAX)).contains(&n) => Ok(Some(n as u32)),
            _ => Err(ApiError::bad_request(
                format!("`{name}` must be an integer ≥ 1, got {x}"),
                Some(name),
            )),
        },
    }
}

fn field_bool(v: &Value, name: &'static str) -> Result<Option<bool>, ApiError> {
    match v.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(x) => Err(ApiError::bad_request(
            format!("`{name}` must be a boolean, got {x}"),
            Some(name),
        )),
    }
}

/// Prompt tokens of a chat request: OpenAI's counting rule (3 tokens per message
/// for its role header and end marker, plus the role and content, plus 1 for a
/// `name`), and 3 for priming the assistant's reply.
fn chat_prompt_tokens(tok: Tokenizer, v: &Value) -> Result<usize, ApiError> {
    let msgs = match v.get("messages") {
        Some(Value::Array(a)) if !a.is_empty() => a,
        Some(Value::Array(_)) => {
            return Err(ApiError::bad_request(
                "`messages` must not be empty",
                Some("messages"),
            ));
        }
        _ => {
            return Err(ApiError::bad_request(
                "`messages` is required and must be an array of messages",
                Some("messages"),
            ));
        }
    };
    let mut n = 3;
    for (i, m) in msgs.iter().enumerate() {
        let Some(role) = m.get("role").and_then(Value::as_str) else {
            return Err(ApiError::bad_request(
                format!("`messages[{i}].role` is required and must be a string"),
                Some("messages"),
            ));
        };
        n += 3 + tok.count(role);
        if let Some(name) = m.get("name").and_then(Value::as_str) {
            n += 1 + tok.count(name);
        }
        match m.get("content") {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) => n += tok.count(s),
            Some(Value::Array(parts)) => {
                for p in parts {
                    match (p.get("type").and_then(Value::as_str), p.get("text")) {
                        (Some("text"), Some(Value::String(s))) => n += tok.count(s),
                        _ => {
                            return Err(ApiError::bad_request(
                                format!(
                                    "`messages[{i}].content` parts must be {{\"type\": \"text\", \
                                     \"text\": …}}: the simulator takes text only"
                                ),
                                Some("messages"),
                            ));
                        }
                    }
                }
            }
            Some(_) => {
                return Err(ApiError::bad_request(
                    format!("`messages[{i}].content` must be a string or an array of text parts"),
                    Some("messages"),
                ));
            }
        }
    }
    Ok(n)
}

/// Prompt tokens of a legacy completion: a string, a one-element array of
/// strings, or token ids (an array of integers, or a one-element array of them).
fn completion_prompt_tokens(tok: Tokenizer, v: &Value) -> Result<usize, ApiError> {
    let bad = || {
        ApiError::bad_request(
            "`prompt` must be a string or an array of token ids (one prompt per request: n = 1)",
            Some("prompt"),
        )
    };
    let n = match v.get("prompt") {
        Some(Value::String(s)) => tok.count(s),
        Some(Value::Array(a)) if a.len() == 1 && a[0].is_string() => {
            tok.count(a[0].as_str().unwrap_or_default())
        }
        Some(Value::Array(a)) if !a.is_empty() && a.iter().all(Value::is_u64) => a.len(),
        Some(Value::Array(a))
            if a.len() == 1 && a[0].as_array().is_some_and(|x| x.iter().all(Value::is_u64)) =>
        {
            a[0].as_array().map_or(0, Vec::len)
        }
        _ => return Err(bad()),
    };
    if n == 0 {
        return Err(ApiError::bad_request(
            "`prompt` must not be empty",
            Some("prompt"),
        ));
    }
    Ok(n)
}

fn parse(endpoint: Endpoint, body: &[u8], tok: Tokenizer) -> Result<Parsed, ApiError> {
    let v: Value = serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(format!("the request body is not valid JSON: {e}"), None)
    })?;
    if !v.is_object() {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
            None,
        ));
    }
    let model = match v.get("model") {
        Some(Value::String(s)) => s.clone(),
        _ => {
            return Err(ApiError::bad_request(
                "`model` is required and must be a string",
                Some("model"),
            ));
        }
    };
    if let Some(n) = v.get("n").filter(|x| !x.is_null())
        && n.as_u64() != Some(1)
    {
        return Err(ApiError::bad_request(
            format!(
                "`n` = {n} is not supported: the simulator generates exactly one choice (n = 1)"
            ),
            Some("n"),
        ));
    }
    if let Some(b) = v.get("best_of").filter(|x| !x.is_null())
        && b.as_u64() != Some(1)
    {
        return Err(ApiError::bad_request(
            format!("`best_of` = {b} is not supported (only 1)"),
            Some("best_of"),
        ));
    }
    let stream = field_bool(&v, "stream")?.unwrap_or(false);
    let include_usage = match v.get("stream_options") {
        None | Some(Value::Null) => false,
        Some(o @ Value::Object(_)) => field_bool(o, "include_usage")?.unwrap_or(false),
        Some(x) => {
            return Err(ApiError::bad_request(
                format!("`stream_options` must be an object, got {x}"),
                Some("stream_options"),
            ));
        }
    };
    if include_usage && !stream {
        return Err(ApiError::bad_request(
            "`stream_options` is only allowed when `stream` is true",
            Some("stream_options"),
        ));
    }
    let max_tokens = match field_u32(&v, "max_completion_tokens")? {
        Some(m) => Some(m),
        None => field_u32(&v, "max_tokens")?,
    };
    let ignore_eos = field_bool(&v, "ignore_eos")?.unwrap_or(false);
    let prompt_tokens = match endpoint {
        Endpoint::Chat => chat_prompt_tokens(tok, &v)?,
        Endpoint::Completions => completion_prompt_tokens(tok, &v)?,
    };
    Ok(Parsed {
        model,
        prompt_tokens: u32::try_from(prompt_tokens).unwrap_or(u32::MAX),
        stream,
        include_usage,
        max_tokens,
        ignore_eos,
    })
}

fn ids(endpoint: Endpoint, index: u64) -> String {
    match endpoint {
        Endpoint::Chat => format!("chatcmpl-sim-{index}"),
        Endpoint::Completions => format!("cmpl-sim-{index}"),
    }
}

async fn completion(app: Arc<App>, endpoint: Endpoint, req: Request) -> Response {
    let received = Instant::now();
    let body = match axum::body::to_bytes(req.into_body(), MAX_BODY).await {
        Ok(b) => b,
        Err(e) => {
            return ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "invalid_request_error",
                format!("could not read the request body (limit {MAX_BODY} bytes): {e}"),
            )
            .into_response();
        }
    };
    let tok = app.config.tokenizer;
    // Counting a long prompt takes milliseconds: keep it off the async workers.
    let parsed = if body.len() > 16 * 1024 {
        match tokio::task::spawn_blocking(move || parse(endpoint, &body, tok)).await {
            Ok(p) => p,
            Err(_) => {
                return ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "server_error",
                    "request parsing failed",
                )
                .into_response();
            }
        }
    } else {
        parse(endpoint, &body, tok)
    };
    let p = match parsed {
        Ok(p) => p,
        Err(e) => return e.into_response(),
    };
    if p.model != app.model_name {
        return ApiError {
            code: Some("model_not_found"),
            param: Some("model"),
            ..ApiError::new(
                StatusCode::NOT_FOUND,
                "invalid_request_error",
                format!(
                    "The model `{}` does not exist (this simulator serves `{}`).",
                    p.model, app.model_name
                ),
            )
        }
        .into_response();
    }
    let max_len = app.config.model.max_model_len;
    let room = max_len.saturating_sub(p.prompt_tokens);
    if room == 0 || p.max_tokens.is_some_and(|m| m > room) {
        let asked = p.max_tokens.unwrap_or(1);
        return ApiError::bad_request(
            format!(
                "This model's maximum context length is {max_len} tokens. However, you requested \
                 {} tokens ({} in the messages, {asked} in the completion). Please reduce the \
                 length of the messages or completion.",
                u64::from(p.prompt_tokens) + u64::from(asked),
                p.prompt_tokens
            ),
            Some(if p.max_tokens.is_some() {
                "max_tokens"
            } else {
                "messages"
            }),
        )
        .into_response();
    }
    let seed = app.config.seed;
    let index = app.next_index.fetch_add(1, Ordering::Relaxed);
    let fault = draws::fault(&app.config.faults, seed, index);
    let id = ids(endpoint, index);
    let mut truth = TruthRecord {
        request_id: id.clone(),
        index,
        endpoint: endpoint.name(),
        stream: p.stream,
        status: 200,
        received_at: app.clock.at(received),
        first_token_at: None,
        last_token_at: None,
        tokens: 0,
        prompt_tokens: p.prompt_tokens,
        fault: fault.map(Fault::name),
        finish_reason: None,
    };
    let immediate = match fault {
        Some(Fault::Http429) => Some(ApiError {
            code: Some("rate_limit_exceeded"),
            retry_after: Some(app.config.faults.retry_after.as_secs_f64().ceil() as u64),
            ..ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limit_error",
                "Rate limit reached (simulated fault); retry after the Retry-After interval.",
            )
        }),
        Some(Fault::Http500) => Some(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            "The server had an error while processing your request (simulated fault).",
        )),
        Some(Fault::Http503) => Some(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "server_error",
            "The engine is currently overloaded, please try again later (simulated fault).",
        )),
        _ => None,
    };
    if let Some(e) = immediate {
        truth.status = e.status.as_u16();
        app.record_truth(truth);
        return with_id(e.into_response(), &id);
    }
    let max_tokens = p.max_tokens.unwrap_or(room);
    let target = if p.ignore_eos {
        max_tokens
    } else {
        draws::output_len(&app.config.output_len, seed, index).min(max_tokens)
    };
    let shared = Arc::new(SeqShared::default());
    let submitted = app.send(Cmd::Submit(Box::new(Submission {
        index,
        prompt_tokens: p.prompt_tokens,
        output_tokens: target,
        capped: target == max_tokens,
        arrived: received,
        shared: shared.clone(),
    })));
    if !submitted {
        truth.status = 503;
        app.record_truth(truth);
        let e = ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "server_error",
            "the simulator is shutting down",
        );
        return with_id(e.into_response(), &id);
    }
    let delivery = Delivery {
        app: app.clone(),
        shared,
        index,
        word_seed: draws::text_seed(seed, index),
        target,
        finish_reason: if target == max_tokens {
            "length"
        } else {
            "stop"
        },
        prompt_tokens: p.prompt_tokens,
        fault,
        truth,
        armed: true,
    };
    let created = app.clock.at(received).unix_nanos().max(0) as u64 / 1_000_000_000;
    if p.stream {
        let fmt = ChunkFmt::new(endpoint, &id, created, &app.model_json, p.include_usage);
        let body = SseBody::new(delivery, fmt, p.include_usage);
        let mut r = Response::new(Body::new(body));
        let h = r.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream"),
        );
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        return with_id(r, &id);
    }
    let r = non_streaming(delivery, endpoint, &id, created).await;
    with_id(r, &id)
}

/// Adds `x-request-id` (the response id, also the truth log's `request_id`).
fn with_id(mut r: Response, id: &str) -> Response {
    if let Ok(v) = HeaderValue::from_str(id) {
        r.headers_mut().insert("x-request-id", v);
    }
    r
}

async fn non_streaming(mut d: Delivery, endpoint: Endpoint, id: &str, created: u64) -> Response {
    let (produced, done) = WaitDone(&d.shared).await;
    d.armed = false;
    if done == Done::Aborted {
        d.truth.status = 503;
        return ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "server_error",
            "the simulator is shutting down",
        )
        .into_response();
    }
    let faults = &d.app.config.faults;
    match d.fault {
        Some(Fault::SlowFirstToken) => tokio::time::sleep(faults.slow_first_token_delay).await,
        Some(Fault::Stall) => tokio::time::sleep(faults.stall_for).await,
        _ => {}
    }
    let tok = d.app.config.tokenizer;
    let mut text = String::with_capacity(produced as usize * 8);
    for i in 0..u64::from(produced) {
        text.push(' ');
        text.push_str(tok.word(d.word_seed, i));
    }
    let usage = json!({
        "prompt_tokens": d.prompt_tokens,
        "completion_tokens": produced,
        "total_tokens": u64::from(d.prompt_tokens) + u64::from(produced),
    });
    let model: Value = Value::String(d.app.model_name.clone());
    let v = match endpoint {
        Endpoint::Chat => json!({
            "id": id, "object": "chat.completion", "created": created, "model": model,
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "logprobs": null,
                "finish_reason": d.finish_reason,
            }],
            "usage": usage,
        }),
        Endpoint::Completions => json!({
            "id": id, "object": "text_completion", "created": created, "model": model,
            "choices": [{
                "index": 0, "text": text, "logprobs": null, "finish_reason": d.finish_reason,
            }],
            "usage": usage,
        }),
    };
    let mut bytes = serde_json::to_vec(&v).unwrap_or_default();
    let cut = d.fault == Some(Fault::Cut);
    if d.fault == Some(Fault::Malformed) {
        bytes.truncate(bytes.len() / 2);
    }
    if !cut {
        d.truth.finish_reason = Some(d.finish_reason);
    }
    let body = OnceBody::new(d, Bytes::from(bytes), cut, produced);
    let mut r = Response::new(Body::new(body));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chat_prompt_is_counted_with_the_message_overhead() {
        let tok = Tokenizer::O200kBase;
        let v = json!({"model": "m", "messages": [{"role": "user", "content": "Hello, world!"}]});
        let p = parse(Endpoint::Chat, v.to_string().as_bytes(), tok).unwrap();
        // 3 priming + 3 per message + 1 ("user") + 4 ("Hello, world!").
        assert_eq!(p.prompt_tokens, 11);
        assert!(!p.stream && !p.include_usage && p.max_tokens.is_none());
    }

    #[test]
    fn max_completion_tokens_wins_over_max_tokens() {
        let v = json!({"model": "m", "prompt": "hi", "max_tokens": 5, "max_completion_tokens": 7,
                       "stream": true, "stream_options": {"include_usage": true}, "ignore_eos": true});
        let p = parse(
            Endpoint::Completions,
            v.to_string().as_bytes(),
            Tokenizer::O200kBase,
        )
        .unwrap();
        assert_eq!(p.max_tokens, Some(7));
        assert!(p.stream && p.include_usage && p.ignore_eos);
        let ids = json!({"model": "m", "prompt": [1, 2, 3]});
        let p = parse(
            Endpoint::Completions,
            ids.to_string().as_bytes(),
            Tokenizer::O200kBase,
        )
        .unwrap();
        assert_eq!(p.prompt_tokens, 3);
    }

    #[test]
    fn unsupported_requests_get_clear_errors() {
        let tok = Tokenizer::O200kBase;
        let cases = [
            (
                json!({"model": "m", "messages": [{"role": "user", "content": "x"}], "n": 2}),
                "`n`",
            ),
            (json!({"model": "m", "messages": []}), "`messages`"),
            (
                json!({"messages": [{"role": "user", "content": "x"}]}),
                "`model`",
            ),
            (
                json!({"model": "m", "messages": [{"role": "user", "content": "x"}], "max_tokens": 0}),
                "max_tokens",
            ),
            (
                json!({"model": "m", "messages": [{"role": "user", "content": "x"}], "stream_options": {"include_usage": true}}),
                "stream_options",
            ),
        ];
        for (v, needle) in cases {
            let e = parse(Endpoint::Chat, v.to_string().as_bytes(), tok).unwrap_err();
            assert_eq!(e.status, StatusCode::BAD_REQUEST);
            assert!(e.message.contains(needle), "{} lacks {needle}", e.message);
        }
        let e = parse(Endpoint::Chat, b"{not json", tok).unwrap_err();
        assert!(e.message.contains("not valid JSON"));
        let e = parse(
            Endpoint::Completions,
            br#"{"model":"m","prompt":["a","b"]}"#,
            tok,
        )
        .unwrap_err();
        assert!(e.message.contains("n = 1"));
    }
}
