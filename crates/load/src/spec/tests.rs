//! The spec: flags checked together (errors name their flag), the runs laid out,
//! and the load settings serialised as the run record carries them.

use super::*;
use crate::dist::LengthDist;
use crate::schedule::Arrival;
use tpscope_client::RxTimestamps;

/// The flags as the command line's defaults leave them (with a log file named,
/// and user-space stamps).
fn flags() -> Flags {
    Flags {
        out: Some("x.jsonl".into()),
        rx_timestamps: RxTimestamps::User,
        ..Flags::default()
    }
}

#[test]
fn flags_that_do_not_fit_together_name_their_flag() {
    let cases: Vec<(Flags, &str)> = vec![
        (
            Flags {
                time_scale: 0.0,
                ..flags()
            },
            "--time-scale",
        ),
        (
            Flags {
                rate: vec![None, Some(2.0)],
                ..flags()
            },
            "--rate",
        ),
        (
            Flags {
                arrival: Some(Arrival::Constant),
                ..flags()
            },
            "--arrival",
        ),
        (
            Flags {
                concurrency: vec![2, 2],
                ..flags()
            },
            "--concurrency",
        ),
        (
            Flags {
                duration: Some(Duration::ZERO),
                ..flags()
            },
            "--duration",
        ),
        (
            Flags {
                dispatch: Dispatch::Waves,
                rate: vec![Some(2.0)],
                ..flags()
            },
            "--dispatch",
        ),
    ];
    for (f, flag) in cases {
        let e = BenchSpec::from_flags(f).unwrap_err();
        assert!(e.to_string().starts_with(flag), "{e}");
    }
}

#[test]
fn a_rate_list_is_a_sweep_of_sorted_levels_with_the_default_duration() {
    let s = BenchSpec::from_flags(Flags {
        rate: vec![Some(4.0), Some(1.0)],
        ..flags()
    })
    .unwrap();
    assert_eq!(s.sweep, Some("rate"));
    let values: Vec<f64> = s.levels.iter().map(|l| l.value).collect();
    assert_eq!(values, vec![1.0, 4.0]);
    assert_eq!(s.duration, Some(DEFAULT_OPEN_DURATION));
    assert!(
        s.levels
            .iter()
            .all(|l| l.cap.is_none() && l.requests.is_none())
    );
}

#[test]
fn load_settings_serialise_as_the_run_record_carries_them() {
    let s = BenchSpec::from_flags(Flags {
        concurrency: vec![1, 8],
        input_tokens: Some(LengthDist::Fixed(32)),
        warmup: Some(Warmup::Requests(4)),
        ..flags()
    })
    .unwrap();
    let sim = SimulatorSettings {
        model: "m".into(),
        gpu: "g".into(),
        tp: 1,
        speed: "max".into(),
        max_num_seqs: 4,
        seed: 0,
    };
    let v = serde_json::to_value(s.load_settings(1, Some(sim))).unwrap();
    assert_eq!(
        v.to_string(),
        concat!(
            r#"{"concurrency":8,"connections":{"burst":64,"keepalive":true,"opening":"paced","spacing_s":0.05},"#,
            r#""dispatch":"work-conserving","duration_s":null,"ignore_eos":false,"#,
            r#""include_usage":true,"max_retries":0,"mode":"closed_loop","prompts":"salted_by_run_id","#,
            r#""record_chunks":false,"requests":80,"#,
            r#""retry_backoff_s":0.5,"rx_timestamps":"user","seed":0,"#,
            r#""simulator":{"gpu":"g","max_num_seqs":4,"model":"m","seed":0,"speed":"max","tp":1},"#,
            r#""sweep":{"index":1,"level":8.0,"levels":2,"parameter":"concurrency"},"#,
            r#""timeouts_s":{"connect":10.0,"first_token":300.0,"stall":60.0,"total":null},"#,
            r#""warmup":{"amount":"4","written":false},"#,
            r#""workload":{"input_tokens":"32","kind":"synthetic","output_tokens":"azure"}}"#,
        )
    );
}

#[test]
fn the_load_settings_say_what_sessions_the_run_had() {
    let s = BenchSpec::from_flags(Flags {
        concurrency: vec![4],
        sessions: Some(6),
        turns: Some(LengthDist::Fixed(4)),
        think_time: Some("exp:2s".parse().unwrap()),
        ..flags()
    })
    .unwrap();
    let v = serde_json::to_value(s.load_settings(0, None)).unwrap();
    assert_eq!(
        v["sessions"],
        serde_json::json!({"count": 6, "turns": "4", "think_time": "exp:2s"})
    );
    let plan = crate::workload::sessions::SessionPlan {
        source: crate::workload::sessions::SessionSource::Conversations {
            source: "chats.jsonl".into(),
            items: Arc::new(vec![]),
            sessions: 2,
        },
        think_time: None,
    };
    assert_eq!(
        serde_json::to_value(plan.settings()).unwrap(),
        serde_json::json!({"count": 2, "conversations": "chats.jsonl", "think_time": null})
    );
    // A single-turn run says nothing about sessions.
    let plain = BenchSpec::from_flags(Flags {
        concurrency: vec![4],
        ..flags()
    })
    .unwrap();
    let v = serde_json::to_value(plain.load_settings(0, None)).unwrap();
    assert!(v.get("sessions").is_none(), "{v}");
}

#[test]
fn requests_get_first_token_and_stall_limits_by_default_that_none_lifts() {
    let s = BenchSpec::from_flags(flags()).unwrap();
    let t = s.client.timeouts;
    assert_eq!(t.first_token, Some(DEFAULT_FIRST_TOKEN_TIMEOUT));
    assert_eq!(t.stall, Some(DEFAULT_STALL_TIMEOUT));
    assert_eq!(s.model_lookup_timeout(), MODEL_LOOKUP_TIMEOUT);
    let s = BenchSpec::from_flags(Flags {
        timeout_first_token: Some(Limit(None)),
        timeout_stall: Some(Limit(Some(Duration::from_secs(2)))),
        ..flags()
    })
    .unwrap();
    assert_eq!(s.client.timeouts.first_token, None);
    assert_eq!(s.client.timeouts.stall, Some(Duration::from_secs(2)));
    let s = BenchSpec::from_flags(Flags {
        timeout_first_token: Some(Limit(Some(Duration::from_secs(1)))),
        ..flags()
    })
    .unwrap();
    assert_eq!(s.model_lookup_timeout(), Duration::from_secs(1));
}

#[test]
fn a_fixed_output_length_is_exact_unless_turned_off() {
    // `None`: neither flag; `Some(b)`: --ignore-eos or --no-ignore-eos.
    let fixed = |ignore_eos: Option<bool>, extra: Option<serde_json::Value>| {
        BenchSpec::from_flags(Flags {
            output_tokens: Some(LengthDist::Fixed(64)),
            ignore_eos: ignore_eos == Some(true),
            no_ignore_eos: ignore_eos == Some(false),
            extra_body: extra.map(|v| v.as_object().unwrap().clone()),
            ..flags()
        })
        .unwrap()
    };
    let s = fixed(None, None);
    assert_eq!((s.ignore_eos, s.min_tokens), (true, Some(64)));
    assert_eq!(
        serde_json::Value::Object(s.extra_body.clone()),
        serde_json::json!({"ignore_eos": true, "min_tokens": 64})
    );
    let v = serde_json::to_value(s.load_settings(0, None)).unwrap();
    assert_eq!(
        (v["ignore_eos"].clone(), v["min_tokens"].clone()),
        (true.into(), 64.into())
    );
    let s = fixed(Some(false), None);
    assert_eq!((s.ignore_eos, s.min_tokens), (false, None));
    assert!(s.extra_body.is_empty());
    // The user's own body wins over the default.
    let s = fixed(None, Some(serde_json::json!({"ignore_eos": false})));
    assert!(!s.ignore_eos);
    // A distribution is only a cap, unless --ignore-eos; then no min_tokens.
    let s = BenchSpec::from_flags(Flags {
        output_tokens: Some(LengthDist::Uniform { lo: 8, hi: 16 }),
        ..flags()
    })
    .unwrap();
    assert!(!s.ignore_eos && s.extra_body.is_empty());
    let s = BenchSpec::from_flags(Flags {
        ignore_eos: true,
        ..flags()
    })
    .unwrap();
    assert_eq!((s.ignore_eos, s.min_tokens), (true, None));
}

#[test]
fn a_temperature_flag_is_sent_in_every_body_and_wins_over_extra_body() {
    let spec = |temperature, extra: serde_json::Value| {
        BenchSpec::from_flags(Flags {
            temperature,
            extra_body: extra.as_object().cloned(),
            ..flags()
        })
        .unwrap()
    };
    let s = spec(
        Some(0.0),
        serde_json::json!({"temperature": 1.0, "top_p": 0.9}),
    );
    assert_eq!(
        serde_json::Value::Object(s.extra_body.clone()),
        serde_json::json!({"temperature": 0.0, "top_p": 0.9})
    );
    assert_eq!(s.flags.temperature, Some(0.0));
    // Not given: the server's own default, and --extra-body's as written.
    let s = spec(None, serde_json::json!({"temperature": 1.0}));
    assert_eq!(s.extra_body["temperature"], 1.0);
    let s = spec(None, serde_json::Value::Null);
    assert!(s.extra_body.is_empty());
}

#[test]
fn the_flags_given_are_in_the_run_records_load_settings_only_when_filled_in() {
    let mut s = BenchSpec::from_flags(flags()).unwrap();
    let v = serde_json::to_value(s.load_settings(0, None)).unwrap();
    assert!(
        v.get("flags_given").is_none(),
        "a library caller's spec: none"
    );
    s.given = vec![GivenFlag {
        flag: "--concurrency".into(),
        values: vec!["8".into()],
    }];
    let v = serde_json::to_value(s.load_settings(0, None)).unwrap();
    assert_eq!(
        v["flags_given"],
        serde_json::json!([{"flag": "--concurrency", "values": ["8"]}])
    );
}

#[test]
fn vllm_dataset_names_map_to_tpscope_workloads() {
    let s = BenchSpec::from_flags(Flags {
        dataset_name: Some(DatasetName::Random),
        ..flags()
    })
    .unwrap();
    let v = serde_json::to_value(s.workload.settings()).unwrap();
    assert_eq!(v["input_tokens"], "1024");
    assert_eq!(v["output_tokens"], "128");
    for (name, path, flag) in [
        (None, Some("x.json"), "--dataset-path"),
        (Some(DatasetName::Random), Some("x.json"), "--dataset-path"),
        (Some(DatasetName::ShareGpt), None, "--dataset-name"),
        (Some(DatasetName::Custom), None, "--dataset-name"),
    ] {
        let e = BenchSpec::from_flags(Flags {
            dataset_name: name,
            dataset_path: path.map(Into::into),
            ..flags()
        })
        .unwrap_err();
        assert!(e.to_string().starts_with(flag), "{e}");
    }
    let e = "sonnet".parse::<DatasetName>().unwrap_err();
    assert!(e.to_string().contains("no `sonnet` dataset"), "{e}");
}

#[test]
fn request_rate_inf_with_burstiness_is_accepted_as_in_vllm() {
    let s = BenchSpec::from_flags(Flags {
        rate: vec![None],
        burstiness: Some(1.0),
        ..flags()
    })
    .unwrap();
    assert!(matches!(s.levels[0].schedule, Schedule::Backlog));
    assert!(s.notes.is_empty());
    let s = BenchSpec::from_flags(Flags {
        burstiness: Some(0.5),
        ..flags()
    })
    .unwrap();
    assert_eq!(s.notes.len(), 1, "{:?}", s.notes);
}

#[test]
fn repeat_runs_send_other_prompts_unless_same_prompts_is_asked_for() {
    // What broke: the same --seed sent identical prompts every run, and the second
    // run was served from vLLM's prefix cache.
    let s = BenchSpec::from_flags(flags()).unwrap();
    let (a, b) = (
        s.plan(&s.levels[0], "run-a".into()),
        s.plan(&s.levels[0], "run-b".into()),
    );
    assert_ne!(a.prompt_salt, 0);
    assert_ne!(a.prompt_salt, b.prompt_salt);
    let tk = s.flags.tokenizer;
    assert_ne!(
        a.workload.request(0, a.seed, a.prompt_salt, tk, None),
        b.workload.request(0, b.seed, b.prompt_salt, tk, None)
    );
    let same = BenchSpec::from_flags(Flags {
        same_prompts: true,
        ..flags()
    })
    .unwrap();
    let (a, b) = (
        same.plan(&same.levels[0], "run-a".into()),
        same.plan(&same.levels[0], "run-b".into()),
    );
    assert_eq!((a.prompt_salt, b.prompt_salt), (0, 0));
    let v = serde_json::to_value(same.load_settings(0, None)).unwrap();
    assert_eq!(v["prompts"], "same_every_run");
}

#[test]
fn the_default_workload_is_shortened_to_the_models_context_and_explicit_lengths_that_cannot_fit_are_refused()
 {
    // What broke: the default workload against a 4k-context vLLM drew 31 of 320
    // requests longer than the context (HTTP 400).
    let s = BenchSpec::from_flags(flags()).unwrap();
    let fit = s.context_fit(4096).unwrap();
    let limit = fit.limit.expect("the Azure lengths exceed 4k tokens");
    assert!(fit.note.unwrap().contains("4096"));
    let p = s.plan(&s.levels[0], "r".into());
    for seq in 0..2000 {
        let r = p
            .workload
            .request(seq, p.seed, p.prompt_salt, s.flags.tokenizer, fit.limit);
        assert!(r.input_tokens.unwrap() + u64::from(r.max_tokens()) <= u64::from(limit));
    }
    assert_eq!(s.context_fit(1 << 20).unwrap(), ContextFit::default());
    let fixed = BenchSpec::from_flags(Flags {
        input_tokens: Some(LengthDist::Fixed(4000)),
        output_tokens: Some(LengthDist::Fixed(256)),
        ..flags()
    })
    .unwrap();
    let e = fixed.context_fit(4096).unwrap_err().to_string();
    assert!(
        e.contains("--input-tokens") && e.contains("4256") && e.contains("4096"),
        "{e}"
    );
    assert_eq!(fixed.context_fit(8192).unwrap(), ContextFit::default());
}

#[test]
fn a_ramp_spans_the_duration_when_given_else_the_requests() {
    use crate::ramp::{RampOver, RampPlan};
    let ramp = "linear:2..20".parse().unwrap();
    let s = BenchSpec::from_flags(Flags {
        rate: vec![Some(20.0)],
        requests: Some(100),
        ramp_up: Some(ramp),
        ..flags()
    })
    .unwrap();
    assert_eq!(
        s.levels[0].schedule,
        Schedule::RampedRate {
            ramp: RampPlan {
                ramp,
                over: RampOver::Requests(100)
            },
            arrival: Arrival::Poisson
        }
    );
    let s = BenchSpec::from_flags(Flags {
        duration: Some(Duration::from_secs(9)),
        ramp_up: Some("exponential:1..16".parse().unwrap()),
        ..flags()
    })
    .unwrap();
    let plan = s.levels[0].schedule.cap_ramp().unwrap();
    assert_eq!(plan.over, RampOver::Duration(Duration::from_secs(9)));
    assert_eq!(s.levels[0].cap, Some(16));
    let settings = serde_json::to_value(s.load_settings(0, None)).unwrap();
    assert_eq!(settings["ramp_up"]["applies_to"], "concurrency");
    assert_eq!(settings["ramp_up"]["over"], "duration");
}
