//! The whole report in text, markdown and HTML, held by snapshots: a hand-made
//! run that fills every section a run can show (failures by cause, goodput and
//! cost, the distributions, measurement quality, the diagnosis, the server
//! beside the client, the ramp, sessions, the count check, warnings) and a reader's skipped records.
//! A change to any section's layout shows here, in every format at once.

use std::num::NonZeroU32;
use std::time::Duration;

use tpscope_analysis::count_check::CountCheck;
use tpscope_analysis::detail::detail;
use tpscope_analysis::knee::Knee;
use tpscope_analysis::ramp::{RampFollow, RampPoint};
use tpscope_analysis::server::ServerVsClient;
use tpscope_analysis::{
    Options, Prices, REPORT_SCHEMA, Report, RunInput, SessionTurn, SpanFacts, analyze, parse_goals,
};
use tpscope_model::{Cause, RunRecord, SCHEMA, Status, Target, Timestamp};
use tpscope_render::{html, markdown, text};

fn ts(ms: i64) -> Timestamp {
    Timestamp::from_unix_nanos(1_800_000_000_000_000_000 + ms * 1_000_000)
}

/// A span queued at `q`, admitted at `a`, its first token `ttft` ms later,
/// streaming `tokens` for `stream` ms, released 5 ms after its last token.
fn span(q: i64, a: i64, ttft: i64, stream: i64, tokens: u64) -> SpanFacts {
    let last = a + ttft + stream;
    let mut s = SpanFacts::ok(
        ts(q),
        Some(ts(a)),
        Some(ts(a + ttft)),
        Some(ts(last)),
        ts(last + 5),
        tokens,
    );
    s.input_tokens = Some(100 + tokens);
    s
}

fn input() -> RunInput {
    let mut input = RunInput {
        run_id: "snap".into(),
        run: Some(RunRecord {
            run_id: "snap".into(),
            schema: SCHEMA.into(),
            tool: "tpscope 0.1.0".into(),
            started_at: ts(0),
            target: Target {
                url: Some("http://127.0.0.1:8000/v1".into()),
                model: Some("m".into()),
                api: Some("chat".into()),
            },
            cap: Some(2),
            token_source: None,
            tokenizer: None,
            sample_interval: None,
            sample_heartbeat: None,
            load: serde_json::Value::Null,
            labels: [("gpu".to_string(), "h100".to_string())].into(),
            queue_times: Default::default(),
        }),
        ..RunInput::default()
    };
    let mut spans = vec![
        span(0, 0, 200, 800, 100),
        span(0, 0, 300, 1200, 300),
        span(0, 1005, 150, 600, 60),
        span(100, 1505, 400, 1500, 1200),
        span(200, 1760, 120, 300, 20),
        span(2500, 2500, 90, 500, 80),
    ];
    let mut failed = span(300, 2185, 0, 0, 0);
    failed.status = Status::Error;
    failed.error_cause = Some(Cause::Http429);
    failed.first_token_at = None;
    failed.last_token_at = None;
    failed.retry_count = 1;
    failed.retry_causes = vec![Cause::Http5xx].into();
    spans.push(failed);
    for (i, s) in spans.iter_mut().enumerate().take(4) {
        s.session = Some(SessionTurn {
            session: (i % 2) as u32,
            turn: NonZeroU32::new(1 + (i / 2) as u32).unwrap(),
        });
    }
    for s in spans {
        input.push_span(s, None);
    }
    input
}

fn report() -> (Report, Vec<u8>) {
    let input = input();
    let opts = Options {
        bucket: Some(Duration::from_millis(500)),
        prices: Prices {
            per_hour: Some(2.0),
            per_mtok_in: Some(0.1),
            per_mtok_out: Some(0.4),
            per_kwh: None,
        },
        goals: Some(parse_goals("ttft:250ms").unwrap()),
        ..Options::default()
    };
    let mut r = analyze(&input, &opts);
    let details = vec![detail(&input, &r)];
    r.measurement_quality.connect_max_s = Some(Duration::from_micros(1800));
    r.measurement_quality.resends = 1;
    r.ramp = Some(RampFollow {
        applies_to: "rate".into(),
        points: (0..4)
            .map(|i| RampPoint {
                from_s: f64::from(i),
                to_s: f64::from(i + 1),
                load: Some(2.0 * f64::from(i + 1)),
                system_tps: Some([100.0, 190.0, 200.0, 201.0][i as usize]),
            })
            .collect(),
        knee: Knee::At(1),
    });
    r.count_check = Some(CountCheck {
        spans: 6,
        usage_tokens: 1760,
        tokenizer_tokens: 1751,
        difference: Some(-9.0 / 1760.0),
        spans_differing: 2,
        warning: None,
    });
    r.server = Some(ServerVsClient {
        server: Some("vllm".into()),
        scrapes: 12,
        mean_running: Some(1.8),
        mean_waiting: Some(0.4),
        max_kv_cache_usage: Some(0.37),
        preemptions: Some(0.0),
        server_output_tokens: Some(1760.0),
        client_output_tokens: 1760,
        output_tokens_difference: Some(0.0),
        server_input_tokens: Some(2360.0),
        client_input_tokens: Some(2360),
        server_ttft_mean: Some(Duration::from_millis(180)),
        client_ttft_mean: r.distributions.t_first_token.mean,
        server_queue_time_mean: Some(Duration::from_millis(20)),
        client_queue_time_mean: r.distributions.t_queue.mean,
        series: Vec::new(),
    });
    let report = Report {
        schema: REPORT_SCHEMA,
        runs: vec![r],
        skipped: [("bad json".to_string(), 2)].into(),
        warnings: vec!["snap.jsonl: the last line was cut off".into()],
        sweeps: Vec::new(),
    };
    let page = html::report(&report, &details);
    (report, page)
}

#[test]
fn report_text_snapshot() {
    insta::assert_snapshot!(String::from_utf8(text::render(&report().0)).unwrap());
}

#[test]
fn report_markdown_snapshot() {
    insta::assert_snapshot!(String::from_utf8(markdown::render(&report().0)).unwrap());
}

#[test]
fn report_html_snapshot() {
    insta::assert_snapshot!(String::from_utf8(report().1).unwrap());
}
