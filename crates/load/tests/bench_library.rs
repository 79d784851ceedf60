//! The bench as a library call: a spec from [`Flags`] run against the in-process
//! simulator with `tpscope_load::bench::bench`, the runs handed back and the span
//! log written as `tpscope bench` writes it (a run record, spans and an end record
//! per sweep level); a target that does not answer is a failure naming the model
//! lookup. Counts, not times: the simulator runs as fast as possible.

use std::net::{Ipv4Addr, SocketAddr};

use tpscope_load::LengthDist;
use tpscope_load::bench::{BenchError, BenchTarget, Live, Simulated, bench, connect};
use tpscope_load::spec::{BenchSpec, Flags, SimulatorSettings};
use tpscope_model::{Api, Record, Status, TargetApi};
use tpscope_sim::{SimConfig, Speed};

mod support;

use support::Buf;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_runs_as_a_library_call_and_writes_each_levels_run() {
    let cfg = SimConfig {
        speed: Speed::Max,
        ..SimConfig::default()
    };
    let sim = tpscope_sim::start(cfg, SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
        .await
        .unwrap();
    let spec = BenchSpec::from_flags(Flags {
        concurrency: vec![2, 4],
        requests: Some(12),
        input_tokens: Some(LengthDist::Fixed(16)),
        output_tokens: Some(LengthDist::Fixed(8)),
        ..Flags::default()
    })
    .unwrap();
    let c = sim.config();
    let target = BenchTarget {
        base_url: sim.base_url(),
        simulator: Some(Simulated {
            settings: SimulatorSettings {
                model: c.model.name.clone(),
                gpu: c.gpu.name.clone(),
                tp: c.tp,
                speed: c.speed.to_string(),
                max_num_seqs: c.max_num_seqs,
                seed: c.seed,
            },
            max_model_len: c.model.max_model_len,
        }),
    };
    let log = Buf::default();
    let run = bench(&spec, target, Box::new(log.clone())).await.unwrap();
    let model = sim.model_name().to_string();
    sim.shutdown().await.unwrap();

    assert_eq!(run.summaries.len(), 2);
    assert_eq!(run.run_ids.len(), 2);
    for s in &run.summaries {
        assert_eq!(
            (s.spans, s.status.ok, s.status.error, s.status.cancelled),
            (12, 12, 0, 0)
        );
    }
    assert_eq!(run.total().status.ok, 24);

    let text = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
    let records: Vec<Record> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let runs: Vec<_> = records
        .iter()
        .filter_map(|r| match r {
            Record::Run(r) => Some(r),
            _ => None,
        })
        .collect();
    assert_eq!(
        runs.iter().map(|r| r.run_id.as_str()).collect::<Vec<_>>(),
        run.run_ids
    );
    for (r, cap) in runs.iter().zip([2, 4]) {
        assert_eq!(r.cap, Some(cap));
        // The model came from the simulator's GET /models; a simulator has no URL.
        assert_eq!(r.target.model.as_deref(), Some(model.as_str()));
        assert_eq!(r.target.url, None);
        assert_eq!(r.target.api, Some(TargetApi::Known(Api::Chat)));
        assert_eq!(r.labels.get("sweep"), Some(&format!("concurrency={cap}")));
        assert_eq!(r.load["simulator"]["speed"], "max");
    }
    for id in &run.run_ids {
        let ok = records
            .iter()
            .filter(|r| r.run_id() == id && matches!(r, Record::Span(s) if s.status == Status::Ok))
            .count();
        assert_eq!(ok, 12, "{id}");
        let ends: Vec<_> = records
            .iter()
            .filter_map(|r| match r {
                Record::End(e) if e.run_id == *id => Some(e),
                _ => None,
            })
            .collect();
        assert_eq!(ends.len(), 1, "{id}");
        // The session's end record counts what its writer wrote for the run.
        assert_eq!((ends[0].spans, ends[0].status.ok), (12, 12), "{id}");
        let last = records.iter().rposition(|r| r.run_id() == id);
        assert!(
            matches!(last.map(|i| &records[i]), Some(Record::End(_))),
            "{id}: the end record is the run's last"
        );
    }
}

#[tokio::test]
async fn a_target_that_does_not_answer_fails_in_the_model_lookup() {
    // A port nothing listens on (bound, then let go).
    let port = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/v1");
    let spec = BenchSpec::from_flags(Flags {
        url: Some(url.clone()),
        ..Flags::default()
    })
    .unwrap();
    let Err(e) = connect(&spec, BenchTarget::url(url.clone()), Live::default(), &()).await else {
        panic!("a dead target connected");
    };
    assert!(matches!(e, BenchError::ModelLookup { .. }), "{e:?}");
    assert!(e.is_failure());
    assert!(e.to_string().contains(&format!("{url}/models")), "{e}");
}
