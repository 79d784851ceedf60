//! The spec: flags checked together (errors name their flag), the runs laid out,
//! and the load settings serialised as the run record carries them.

use super::*;

/// The flags as the command line's defaults leave them.
fn flags() -> Flags {
    Flags {
        api: Api::Chat,
        model: None,
        api_key: None,
        headers: vec![],
        extra_body: None,
        no_usage: false,
        input_tokens: None,
        output_tokens: None,
        dataset: None,
        sharegpt: None,
        trace: None,
        time_scale: 1.0,
        seed: 0,
        concurrency: vec![],
        requests: None,
        duration: None,
        rate: vec![],
        arrival: None,
        burstiness: None,
        warmup: None,
        dispatch: Dispatch::WorkConserving,
        drain_timeout: Duration::from_secs(30),
        max_retries: 0,
        retry_backoff: Duration::from_millis(500),
        timeout_connect: Duration::from_secs(10),
        timeout_first_token: None,
        timeout_stall: None,
        timeout_total: None,
        out: Some("x.jsonl".into()),
        sample_interval: Duration::from_millis(10),
        record_chunks: false,
        rx_timestamps: RxTimestamps::User,
        labels: vec![],
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
    assert_eq!(base_url("http://h/v1/").unwrap(), "http://h/v1");
    assert!(
        base_url("ftp://h")
            .unwrap_err()
            .to_string()
            .starts_with("--url")
    );
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
            r#"{"concurrency":8,"dispatch":"work-conserving","duration_s":null,"include_usage":true,"#,
            r#""max_retries":0,"mode":"closed_loop","record_chunks":false,"requests":80,"#,
            r#""retry_backoff_s":0.5,"rx_timestamps":"user","seed":0,"#,
            r#""simulator":{"gpu":"g","max_num_seqs":4,"model":"m","seed":0,"speed":"max","tp":1},"#,
            r#""sweep":{"index":1,"level":8.0,"levels":2,"parameter":"concurrency"},"#,
            r#""timeouts_s":{"connect":10.0,"first_token":null,"stall":null,"total":null},"#,
            r#""warmup":{"amount":"4","written":false},"#,
            r#""workload":{"input_tokens":"32","kind":"synthetic","output_tokens":"azure"}}"#,
        )
    );
}
