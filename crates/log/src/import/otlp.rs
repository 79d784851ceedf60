//! OTLP/JSON trace files (OTLP 1.x `ExportTraceServiceRequest` in its JSON form, one
//! document or one per line as the Collector's file exporter writes) with the
//! OpenTelemetry GenAI semantic conventions (1.26 and later; OpenLLMetry's older
//! `gen_ai.usage.prompt_tokens`/`completion_tokens` too). Every span with a
//! `gen_ai.operation.name` or a `gen_ai.usage.output_tokens` attribute is one
//! request: start and end from the span, tokens from `gen_ai.usage.*` (the server's
//! usage), the first token from `gen_ai.response.time_to_first_chunk`, vLLM's
//! `gen_ai.latency.time_to_first_token` or the first event named like
//! `*first_token*`/`*first_chunk*`/`*chunk*`, where present. A file may also hold a
//! JSON array of such documents.
//!
//! One call traced on both sides (the client's span and, under it, the server's)
//! counts once: a GenAI span with a GenAI ancestor in its trace is folded into the
//! outermost one, which keeps its own start and end (what the caller waited) and
//! takes what it lacks — the first-token instant, the token counts — from the
//! spans under it. A call the client says did not stream (OpenLLMetry's
//! `gen_ai.is_streaming`/`llm.is_streaming` false) got its first token at its end.
//! A span that ended ok without a token count counts its chunk events (token
//! source `chunks`, a lower bound), or else has unknown tokens: counted as 0 and
//! named in a warning, never silently.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::Value;
use tpscope_model::{Cause, Target, TargetApi, Timestamp, TokenSource};

use super::ImportError;
use super::build::{Cx, Raw, cause_of_status, secs};
use super::otlp_console as console;
use super::otlp_names::{self as n, INSTANTS};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Request {
    /// Absent: a document of another shape (serde reads any object as one).
    #[serde(default)]
    resource_spans: Option<Vec<ResourceSpans>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ResourceSpans {
    #[serde(default)]
    scope_spans: Vec<ScopeSpans>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ScopeSpans {
    #[serde(default)]
    spans: Vec<OSpan>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct OSpan {
    #[serde(default)]
    trace_id: String,
    #[serde(default)]
    span_id: String,
    #[serde(default)]
    parent_span_id: String,
    #[serde(default)]
    start_time_unix_nano: Option<Value>,
    #[serde(default)]
    end_time_unix_nano: Option<Value>,
    #[serde(default)]
    attributes: Vec<KeyValue>,
    #[serde(default)]
    events: Vec<Event>,
    #[serde(default)]
    status: Option<Status>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Event {
    #[serde(default)]
    time_unix_nano: Option<Value>,
    #[serde(default)]
    name: String,
}

#[derive(Deserialize)]
struct Status {
    #[serde(default)]
    code: Option<Value>,
    #[serde(default)]
    message: Option<String>,
}

#[derive(Deserialize)]
struct KeyValue {
    key: String,
    #[serde(default)]
    value: AnyValue,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct AnyValue {
    string_value: Option<String>,
    int_value: Option<Value>,
    double_value: Option<f64>,
    bool_value: Option<bool>,
}

/// A 64-bit integer as OTLP/JSON writes it: a decimal string, or a number.
fn int(v: &Value) -> Option<i64> {
    match v {
        Value::String(s) => s.parse().ok(),
        Value::Number(n) => n.as_i64(),
        _ => None,
    }
}

impl OSpan {
    fn attr(&self, key: &str) -> Option<&AnyValue> {
        self.attributes
            .iter()
            .find(|kv| kv.key == key)
            .map(|kv| &kv.value)
    }
    fn int_attr(&self, keys: &[&str]) -> Option<u64> {
        keys.iter().find_map(|k| {
            let v = self.attr(k)?;
            v.int_value
                .as_ref()
                .and_then(int)
                .or_else(|| v.double_value.map(|d| d as i64))
                .or_else(|| v.string_value.as_deref().and_then(|s| s.parse().ok()))
                .and_then(|n| u64::try_from(n).ok())
        })
    }
    fn str_attr(&self, key: &str) -> Option<&str> {
        self.attr(key)?.string_value.as_deref()
    }
    /// A model call: a GenAI operation other than an agent's or a tool's, or usage.
    fn is_genai(&self) -> bool {
        if self.is_agent_step() {
            return false;
        }
        self.attr(n::OPERATION).is_some()
            || self.attr(n::OUTPUT_TOKENS).is_some()
            || self.attr(n::COMPLETION_TOKENS_OLD).is_some()
            || self.attr(VLLM_TTFT).is_some()
    }
    /// An agent framework's span around calls (`invoke_agent`, `create_agent`) or a
    /// tool's (`execute_tool`): not a model call, though it may sum its calls' usage.
    fn is_agent_step(&self) -> bool {
        self.str_attr(n::OPERATION)
            .is_some_and(|op| AGENT_STEPS.contains(&op))
    }
    /// Whether the call streamed, where the instrumentation says (OpenLLMetry).
    fn streaming(&self) -> Option<bool> {
        ["gen_ai.is_streaming", "llm.is_streaming"]
            .iter()
            .find_map(|k| self.attr(k)?.bool_value)
    }
    /// The chunk events' instants, in order.
    fn chunk_events(&self) -> Vec<i64> {
        let mut t: Vec<i64> = self
            .events
            .iter()
            .filter(|e| e.name.to_ascii_lowercase().contains("chunk"))
            .filter_map(|e| e.time_unix_nano.as_ref().and_then(int))
            .collect();
        t.sort_unstable();
        t
    }
    fn double_attr(&self, key: &str) -> Option<f64> {
        let v = self.attr(key)?;
        v.double_value
            .or_else(|| v.int_value.as_ref().and_then(int).map(|n| n as f64))
    }
}

const OUTPUT: &[&str] = &[n::OUTPUT_TOKENS, n::COMPLETION_TOKENS_OLD];
const INPUT: &[&str] = &[n::INPUT_TOKENS, n::PROMPT_TOKENS_OLD];
/// vLLM's server-side time to first token (seconds from the span's start).
const VLLM_TTFT: &str = "gen_ai.latency.time_to_first_token";
/// vLLM's server-side time to the last token (seconds from the span's start); the
/// span itself closes after it.
const VLLM_E2E: &str = "gen_ai.latency.e2e";
/// The GenAI operations that are not model calls (agent and tool spans).
const AGENT_STEPS: &[&str] = &["invoke_agent", "create_agent", "execute_tool"];

fn cause_of(s: &OSpan) -> Cause {
    // tpscope's own export names the cause exactly.
    if let Some(c) = s.str_attr(n::CAUSE).and_then(|c| c.parse().ok()) {
        return c;
    }
    let kind = s.str_attr(n::ERROR_TYPE).unwrap_or("").to_ascii_lowercase();
    let fallback = if kind.contains("ratelimit") {
        Cause::Http429
    } else if kind.contains("timeout") {
        Cause::TimeoutTotal
    } else if kind.contains("connection") || kind.contains("connect") {
        Cause::Connect
    } else if kind.contains("internalserver") {
        Cause::Http5xx
    } else if kind.contains("badrequest")
        || kind.contains("notfound")
        || kind.contains("authentication")
    {
        Cause::Http4xx
    } else {
        Cause::Disconnect
    };
    let status = s.int_attr(&["http.response.status_code", "http.status_code"]);
    cause_of_status(status, fallback)
}

fn is_error(s: &OSpan) -> bool {
    match s.status.as_ref().and_then(|st| st.code.as_ref()) {
        Some(Value::Number(n)) => n.as_u64() == Some(2),
        Some(Value::String(c)) => c == "STATUS_CODE_ERROR",
        _ => false,
    }
}

/// The span's own first-token instant, when it records one.
fn first_token(s: &OSpan, start: Timestamp) -> Option<Timestamp> {
    let ttfc = ["gen_ai.response.time_to_first_chunk", VLLM_TTFT]
        .iter()
        .find_map(|k| s.double_attr(k))
        .and_then(secs)
        .map(|d| start.after(d));
    let event = s
        .events
        .iter()
        .filter(|e| {
            let n = e.name.to_ascii_lowercase();
            n.contains("first_token") || n.contains("first_chunk") || n.contains("chunk")
        })
        .filter_map(|e| e.time_unix_nano.as_ref().and_then(int))
        .min()
        .map(Timestamp::from_unix_nanos);
    ttfc.or(event)
}

/// The last token: vLLM's e2e latency after the start where the span states one
/// (its span closes later, 1.3 ms on a published vLLM 0.29 span), else the end.
fn last_token(s: &OSpan, start: Timestamp, first: Timestamp, end: Timestamp) -> Timestamp {
    s.double_attr(VLLM_E2E)
        .and_then(secs)
        .map(|d| start.after(d))
        .filter(|t| (first..=end).contains(t))
        .unwrap_or(end)
}

fn start_of(s: &OSpan) -> Option<Timestamp> {
    s.start_time_unix_nano
        .as_ref()
        .and_then(int)
        .filter(|n| *n > 0)
        .map(Timestamp::from_unix_nanos)
}

/// What one call's spans say: the outer span, and the spans folded into it.
struct Call<'a> {
    outer: &'a OSpan,
    inner: Vec<&'a OSpan>,
}

/// Tallies of what the spans lacked, for the warnings.
#[derive(Default)]
struct Lacks {
    no_first: u64,
    no_tokens: u64,
    by_chunks: u64,
    folded: u64,
    agents: u64,
}

fn span(cx: &Cx<'_>, record: &str, call: &Call<'_>, lacks: &mut Lacks) -> Result<Raw, ImportError> {
    let s = call.outer;
    let time = |field: &str, v: &Option<Value>| {
        v.as_ref()
            .and_then(int)
            .filter(|n| *n > 0)
            .map(Timestamp::from_unix_nanos)
            .ok_or_else(|| cx.bad(record, Some(field), "missing (expected Unix nanoseconds)"))
    };
    let start = time("startTimeUnixNano", &s.start_time_unix_nano)?;
    let end = time("endTimeUnixNano", &s.end_time_unix_nano)?;
    let error = is_error(s).then(|| {
        let msg = s
            .status
            .as_ref()
            .and_then(|st| st.message.clone())
            .or_else(|| s.str_attr(n::ERROR_TYPE).map(str::to_string))
            .unwrap_or_default();
        (cause_of(s), msg)
    });
    let out = s
        .int_attr(OUTPUT)
        .or_else(|| call.inner.iter().find_map(|i| i.int_attr(OUTPUT)));
    let input = s
        .int_attr(INPUT)
        .or_else(|| call.inner.iter().find_map(|i| i.int_attr(INPUT)));
    // A call that did not stream got its first token with the whole answer, at the
    // end, whenever the server produced it.
    let whole = s.streaming() == Some(false);
    let mut first = match whole {
        true => Some(end),
        false => first_token(s, start).or_else(|| {
            call.inner
                .iter()
                .find_map(|i| first_token(i, start_of(i)?))
                .map(|f| f.max(start))
        }),
    };
    if first.is_none() && error.is_none() && out.unwrap_or(0) > 0 {
        // No first-token time recorded: the tokens arrived by the end, which is all
        // that is known (exact for non-streaming calls).
        lacks.no_first += 1;
        first = Some(end);
    }
    // No usage: the chunks the span saw, one token each (a lower bound), else unknown.
    let chunks = s.chunk_events().len() as u64;
    let (out, token_source) = match out {
        None if error.is_none() && chunks > 0 => {
            lacks.by_chunks += 1;
            (Some(chunks), Some(TokenSource::Chunks))
        }
        None if error.is_none() => {
            lacks.no_tokens += 1;
            (None, None)
        }
        o => (o, None),
    };
    let mut raw = Raw {
        request_id: std::iter::once(s)
            .chain(call.inner.iter().copied())
            .find_map(|i| {
                i.str_attr(n::REQUEST_ID)
                    .or(i.str_attr(n::RESPONSE_ID))
                    .or(i.str_attr("gen_ai.request.id"))
            })
            .map(str::to_string)
            .or_else(|| (!s.span_id.is_empty()).then(|| s.span_id.clone())),
        sent_at: Some(start),
        first_token_at: first.map(|f| f.min(end)),
        last_token_at: first.map(|f| last_token(s, start, f.min(end), end)),
        ended_at: Some(end),
        output_tokens: Some(if error.is_some() { 0 } else { out.unwrap_or(0) }),
        input_tokens: input,
        token_source,
        error,
        ..Raw::default()
    };
    tpscope_instants(s, &mut raw);
    Ok(raw)
}

/// The instants a span exported by tpscope carries as events (queued, admitted,
/// first and last token, released), which are exact where the span's own start
/// and end are not (its end is not its last token).
fn tpscope_instants(s: &OSpan, raw: &mut Raw) {
    for i in &INSTANTS {
        let Some(set) = i.import else { continue };
        let at = s
            .events
            .iter()
            .find(|e| e.name == i.name)
            .and_then(|e| e.time_unix_nano.as_ref().and_then(int))
            .filter(|n| *n > 0)
            .map(Timestamp::from_unix_nanos);
        if let Some(at) = at {
            set(raw, at);
        }
    }
}

/// The file's documents: one, a JSON array of them, one per line (the
/// Collector's file exporter), or the Python SDK's console output (converted).
fn documents(cx: &mut Cx<'_>, bytes: &[u8]) -> Result<Vec<Request>, ImportError> {
    let expected = "expected an OTLP/JSON ExportTraceServiceRequest with `resourceSpans`";
    if console::is_console(bytes) {
        let c =
            console::convert(bytes).map_err(|e| cx.not_format(format!("console output: {e}")))?;
        console_warnings(cx, &c);
        let doc = serde_json::from_value(c.document).map_err(|e| cx.not_format(e.to_string()))?;
        return Ok(vec![doc]);
    }
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
    if first == Some(&b'[') {
        return serde_json::from_slice::<Vec<Request>>(bytes)
            .map_err(|e| cx.not_format(format!("{e} (a JSON array: {expected} in each element)")));
    }
    let whole = match serde_json::from_slice::<Request>(bytes) {
        Ok(d) => return Ok(vec![d]),
        Err(e) => e,
    };
    let text = std::str::from_utf8(bytes).map_err(|_| cx.not_format(format!("{whole}")))?;
    let mut docs = Vec::new();
    for (i, l) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let d = serde_json::from_str(l)
            .map_err(|e| cx.not_format(format!("line {}: {e} ({expected})", i + 1)))?;
        docs.push(d);
    }
    Ok(docs)
}

/// Groups the GenAI spans into calls: a GenAI span with a GenAI ancestor in its
/// trace (through spans of any kind) is folded into its outermost GenAI ancestor.
fn calls<'a>(all: &[&'a OSpan]) -> Vec<Call<'a>> {
    let by_id: HashMap<(&str, &str), &OSpan> = all
        .iter()
        .filter(|s| !s.span_id.is_empty())
        .map(|s| ((s.trace_id.as_str(), s.span_id.as_str()), *s))
        .collect();
    let outermost = |s: &'a OSpan| -> Option<&'a OSpan> {
        let mut found = None;
        let mut at = s;
        // Bounded: a malformed file may hold a cycle of parents.
        for _ in 0..64 {
            let Some(p) = by_id.get(&(at.trace_id.as_str(), at.parent_span_id.as_str())) else {
                break;
            };
            if p.is_genai() {
                found = Some(*p);
            }
            at = p;
        }
        found
    };
    let mut calls: Vec<Call<'a>> = Vec::new();
    let mut index: HashMap<(&str, &str), usize> = HashMap::new();
    let mut folded = Vec::new();
    for s in all.iter().copied().filter(|s| s.is_genai()) {
        match outermost(s) {
            Some(o) => folded.push((o, s)),
            None => {
                index.insert((s.trace_id.as_str(), s.span_id.as_str()), calls.len());
                calls.push(Call {
                    outer: s,
                    inner: Vec::new(),
                });
            }
        }
    }
    for (o, s) in folded {
        if let Some(&i) = index.get(&(o.trace_id.as_str(), o.span_id.as_str())) {
            calls[i].inner.push(s);
        }
    }
    calls
}

pub(super) fn import(cx: &mut Cx<'_>, bytes: &[u8]) -> Result<(), ImportError> {
    let docs = documents(cx, bytes)?;
    cx.run.tool = "otlp".into();
    cx.run.token_source = Some(TokenSource::Usage);
    let all: Vec<&OSpan> = docs
        .iter()
        .flat_map(|d| d.resource_spans.iter().flatten())
        .flat_map(|r| &r.scope_spans)
        .flat_map(|s| &s.spans)
        .collect();
    if docs.iter().all(|d| d.resource_spans.is_none()) {
        return Err(cx.not_format(
            "no `resourceSpans` at the top level (expected an OTLP/JSON \
             ExportTraceServiceRequest: `resourceSpans[].scopeSpans[].spans[]`)",
        ));
    }
    let mut calls = calls(&all);
    if calls.is_empty() {
        return Err(cx.not_format(
            "no span is a model call: none has a `gen_ai.operation.name` of a call (chat, \
             text_completion, …) or a `gen_ai.usage.output_tokens`/`completion_tokens` attribute",
        ));
    }
    calls.sort_by_key(|c| start_of(c.outer));
    let genai = || {
        calls
            .iter()
            .flat_map(|c| std::iter::once(c.outer).chain(c.inner.iter().copied()))
    };
    // Spans exported by tpscope state their queue time (an event).
    cx.queue_known = genai().any(|s| s.events.iter().any(|e| e.name == INSTANTS[0].name));
    if let Some(m) = genai().find_map(|s| s.str_attr(n::REQUEST_MODEL)) {
        let server = genai().find_map(|s| {
            let host = s.str_attr(n::SERVER_ADDRESS)?;
            Some(match s.int_attr(&[n::SERVER_PORT]) {
                Some(p) => format!("{host}:{p}"),
                None => host.to_string(),
            })
        });
        cx.run.target = Target {
            url: server,
            model: Some(m.to_string()),
            api: calls[0].outer.str_attr(n::OPERATION).map(TargetApi::from),
        };
    }
    // tpscope's own export states its run's cap on every span: one cap for the file
    // when they agree (the gap fraction needs it), none when they differ.
    let mut caps = genai().map(|s| s.int_attr(&[n::CAP]));
    if let Some(Some(first)) = caps.next()
        && caps.all(|c| c == Some(first))
    {
        cx.run.cap = u32::try_from(first).ok();
    }
    let mut lacks = Lacks {
        agents: all.iter().filter(|s| s.is_agent_step()).count() as u64,
        ..Lacks::default()
    };
    for (i, c) in calls.iter().enumerate() {
        lacks.folded += c.inner.len() as u64;
        let record = format!("span {i} ({})", c.outer.span_id);
        match span(cx, &record, c, &mut lacks) {
            Ok(raw) => cx.push(&record, raw)?,
            Err(e) => cx.reject(e)?,
        }
    }
    warn(cx, &lacks);
    Ok(())
}

fn warn(cx: &mut Cx<'_>, lacks: &Lacks) {
    let file = cx.file.display().to_string();
    if lacks.agents > 0 {
        cx.warnings.push(format!(
            "{file}: {} agent and tool spans (invoke_agent, create_agent, execute_tool) are \
             not model calls: left out, and the calls under them count on their own",
            lacks.agents
        ));
    }
    if lacks.folded > 0 {
        cx.warnings.push(format!(
            "{file}: {} GenAI spans lie under another GenAI span of their trace (a server's \
             span under its client's): each call counts once, with the outer span's times \
             and what it lacks (first token, tokens) from the spans under it",
            lacks.folded
        ));
    }
    if lacks.no_first > 0 {
        cx.warnings.push(format!(
            "{file}: {} spans record no first-token time (no gen_ai.response.time_to_first_chunk, \
             gen_ai.latency.time_to_first_token or chunk event): their first token is placed at \
             the span's end, so their TTFT is the whole call and their stream metrics are absent",
            lacks.no_first
        ));
    }
    if lacks.by_chunks > 0 {
        cx.warnings.push(format!(
            "{file}: {} streamed spans carry no usage: their output tokens are their chunk \
             events, one token each (token source `chunks`, a lower bound when a chunk carried \
             several)",
            lacks.by_chunks
        ));
    }
    if lacks.no_tokens > 0 {
        cx.run
            .labels
            .insert("tokens_unknown_spans".into(), lacks.no_tokens.to_string());
        cx.warnings.push(format!(
            "{file}: {} spans ended ok with no output-token count (no gen_ai.usage.output_tokens \
             or completion_tokens; a streamed call reports usage only when asked, with \
             stream_options.include_usage): their tokens are unknown and counted as 0, so token \
             rates are a lower bound",
            lacks.no_tokens
        ));
    }
}

fn console_warnings(cx: &mut Cx<'_>, c: &console::Converted) {
    let file = cx.file.display().to_string();
    cx.warnings.push(format!(
        "{file}: read as the OpenTelemetry Python SDK's console-exporter output (not \
         OTLP/JSON): instants to the microsecond"
    ));
    if c.repeated > 0 {
        cx.warnings.push(format!(
            "{file}: {} printouts repeat a span (printed at its start too, or by two \
             processors): each span is read once, as it ended",
            c.repeated
        ));
    }
    if c.unfinished > 0 {
        cx.warnings.push(format!(
            "{file}: {} spans never ended in the file (printed without `end_time`, still \
             open when the program stopped): left out",
            c.unfinished
        ));
    }
}
