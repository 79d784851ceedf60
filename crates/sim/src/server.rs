//! The OpenAI-compatible HTTP surface: routes, the completion handler (immediate
//! faults 429/500/503, the hand-over of each accepted request to the engine thread
//! and back out through a response body), and the non-streamed answer.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use bytes::Bytes;
use serde_json::{Value, json};

use crate::api_error::ApiError;
use crate::app::{App, Cmd, Submission};
use crate::draws::{self, Fault};
use crate::handoff::{Done, SeqShared, WaitDone};
use crate::prefix_cache::block_hashes;
use crate::request::{Api, Parsed, parse, truth_name};
use crate::stream::{ChunkFmt, Delivery, OnceBody, SseBody};
use crate::sync::lock;
use crate::truth::TruthRecord;

/// Largest request body accepted (bytes).
const MAX_BODY: usize = 32 * 1024 * 1024;

/// The router of the simulator.
pub(crate) fn router(app: Arc<App>) -> Router {
    let close = app.config.connection_close;
    let r = Router::new()
        .route("/v1/models", get(models))
        .route("/v1/chat/completions", post(chat))
        .route("/v1/completions", post(completions))
        .route("/v1/messages", post(messages))
        .route("/v1/responses", post(responses))
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
    completion(app, Api::Chat, req).await
}

async fn completions(State(app): State<Arc<App>>, req: Request) -> Response {
    completion(app, Api::Completions, req).await
}

async fn messages(State(app): State<Arc<App>>, req: Request) -> Response {
    completion(app, Api::Anthropic, req).await
}

async fn responses(State(app): State<Arc<App>>, req: Request) -> Response {
    completion(app, Api::Responses, req).await
}

fn ids(endpoint: Api, index: u64) -> String {
    match endpoint {
        Api::Chat => format!("chatcmpl-sim-{index}"),
        Api::Completions => format!("cmpl-sim-{index}"),
        Api::Anthropic => format!("msg_sim-{index}"),
        Api::Responses => format!("resp_sim-{index}"),
    }
}

/// Reads and parses a request's body, and checks its model and length against
/// the simulator's: the parsed request and the room its reply has, or the answer.
async fn accept(app: &App, endpoint: Api, req: Request) -> Result<(Parsed, u32), ApiError> {
    let body = axum::body::to_bytes(req.into_body(), MAX_BODY)
        .await
        .map_err(|e| {
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "invalid_request_error",
                format!("could not read the request body (limit {MAX_BODY} bytes): {e}"),
            )
        })?;
    let tok = app.config.tokenizer;
    let units = app.config.prefix_caching;
    // Counting a long prompt takes milliseconds: keep it off the async workers.
    let p = if body.len() > 16 * 1024 {
        tokio::task::spawn_blocking(move || parse(endpoint, &body, tok, units))
            .await
            .map_err(|_| {
                ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "server_error",
                    "request parsing failed",
                )
            })??
    } else {
        parse(endpoint, &body, tok, units)?
    };
    if p.model != app.model_name {
        return Err(ApiError {
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
        });
    }
    let max_len = app.config.model.max_model_len;
    let room = max_len.saturating_sub(p.prompt_tokens);
    if room == 0 || p.max_tokens.is_some_and(|m| m > room) {
        let asked = p.max_tokens.unwrap_or(1);
        return Err(ApiError::bad_request(
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
        ));
    }
    Ok((p, room))
}

/// The error answer of a fault that fails a request at once, if `fault` is one.
fn immediate_error(app: &App, fault: Option<Fault>) -> Option<ApiError> {
    match fault {
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
    }
}

/// How many tokens the reply gets: all of `max_tokens` when the request ignores
/// EOS, else a seeded draw (the n-th request of the same shape draws the n-th).
fn output_target(app: &App, p: &Parsed, max_tokens: u32) -> u32 {
    if p.ignore_eos {
        return max_tokens;
    }
    let nth = {
        let mut seen = lock(&app.eos_seen);
        let n = seen.entry((p.prompt_tokens, p.max_tokens)).or_default();
        *n += 1;
        *n - 1
    };
    let key = draws::eos_key(p.prompt_tokens, p.max_tokens, nth);
    draws::output_len(&app.config.output_len, app.config.seed, key).min(max_tokens)
}

async fn completion(app: Arc<App>, endpoint: Api, req: Request) -> Response {
    let received = Instant::now();
    let (p, room) = match accept(&app, endpoint, req).await {
        Ok(x) => x,
        Err(e) => return e.into_response(),
    };
    let seed = app.config.seed;
    let index = app.next_index.fetch_add(1, Ordering::Relaxed);
    let fault = draws::fault(&app.config.faults, seed, index);
    let id = ids(endpoint, index);
    let mut truth = TruthRecord {
        request_id: id.clone(),
        index,
        endpoint: truth_name(endpoint),
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
    if let Some(e) = immediate_error(&app, fault) {
        truth.status = e.status.as_u16();
        app.record_truth(truth);
        return with_id(e.into_response(), &id);
    }
    let max_tokens = p.max_tokens.unwrap_or(room);
    let target = output_target(&app, &p, max_tokens);
    let shared = Arc::new(SeqShared::default());
    let word_seed = draws::text_seed(seed, index);
    // Prefix caching: the blocks of the prompt and of the reply this request will
    // get (its words are known now), hashed here, off the engine thread.
    let block_hashes = p.prompt_units.map_or_else(Vec::new, |mut u| {
        let tok = app.config.tokenizer;
        u.extend((0..u64::from(target)).map(|i| tok.word_id(word_seed, i)));
        block_hashes(&u)
    });
    let submitted = app.send(Cmd::Submit(Box::new(Submission {
        index,
        prompt_tokens: p.prompt_tokens,
        block_hashes,
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
        word_seed,
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
        let fmt = ChunkFmt::new(
            endpoint,
            &id,
            created,
            &app.model_json,
            p.include_usage,
            p.prompt_tokens,
        );
        let body = SseBody::new(delivery, fmt);
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

async fn non_streaming(mut d: Delivery, endpoint: Api, id: &str, created: u64) -> Response {
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
    let text = crate::stream::words(d.app.config.tokenizer, d.word_seed, produced);
    let usage = json!({
        "prompt_tokens": d.prompt_tokens,
        "completion_tokens": produced,
        "total_tokens": u64::from(d.prompt_tokens) + u64::from(produced),
    });
    let model: Value = Value::String(d.app.model_name.clone());
    let v = match endpoint {
        Api::Chat => json!({
            "id": id, "object": "chat.completion", "created": created, "model": model,
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "logprobs": null,
                "finish_reason": d.finish_reason,
            }],
            "usage": usage,
        }),
        Api::Completions => json!({
            "id": id, "object": "text_completion", "created": created, "model": model,
            "choices": [{
                "index": 0, "text": text, "logprobs": null, "finish_reason": d.finish_reason,
            }],
            "usage": usage,
        }),
        Api::Anthropic => json!({
            "id": id, "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "text", "text": text}],
            "stop_reason": crate::stream::anthropic_stop_reason(d.finish_reason),
            "stop_sequence": null,
            "usage": {"input_tokens": d.prompt_tokens, "output_tokens": produced},
        }),
        Api::Responses => crate::responses::Shape {
            id: id.to_string(),
            created,
            model: d.app.model_name.clone(),
            prompt_tokens: d.prompt_tokens,
        }
        .answer(d.finish_reason, produced, &text),
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
