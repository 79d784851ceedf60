//! Unit tests of the relay benchmark's pure parts (statistics, the schedule, the
//! nginx and LiteLLM configs, the client's chunked decoder and event parser,
//! the upstream's millisecond clock, the kernel line, the rounds log and its
//! pooled ratios), run by `cargo test -p tpscope-proxy`; the benchmark itself
//! runs only under `cargo bench` (its figures are timings, never assertions).

// The benchmark uses every item; this target compiles the modules only for
// their tests (kept here: a `harness = false` bench compiles `cfg(test)` code
// but runs no tests, so tests inside the modules would warn as unused there).
#![allow(dead_code)]

#[path = "client.rs"]
mod client;
#[path = "kernel.rs"]
mod kernel;
#[path = "litellm_conf.rs"]
mod litellm_conf;
#[path = "nginx_conf.rs"]
mod nginx_conf;
#[path = "path.rs"]
mod path;
#[path = "pin.rs"]
mod pin;
#[path = "pool.rs"]
mod pool;
#[path = "schedule.rs"]
mod schedule;
#[path = "stats.rs"]
mod stats;
#[path = "upstream.rs"]
mod upstream;

#[cfg(test)]
mod stats_tests {
    use crate::stats::*;

    #[test]
    fn the_busiest_workers_share_shows_a_proxy_whose_work_went_to_one_thread() {
        // The accept race that sent 85 % of the relaying to one of two threads.
        let s = busiest_share(&[0.45, 2.55]).unwrap();
        assert!((s - 0.85).abs() < 1e-9, "{s}");
        assert_eq!(busiest_share(&[1.0, 1.0, 1.0, 1.0]), Some(0.25));
        // One worker, or none busy: no share to speak of.
        assert_eq!(busiest_share(&[3.0]), None);
        assert_eq!(busiest_share(&[]), None);
        assert_eq!(busiest_share(&[0.0, 0.0]), None);
    }

    #[test]
    fn round_ratios_say_below_only_when_the_medians_interval_is() {
        // Ten rounds: the 95 % interval runs from the 2nd smallest to the 2nd
        // largest (1 − 2·11/1024 = 0.979; the 3rd would cover only 0.89).
        let r =
            RoundRatios::of([0.90, 0.93, 0.95, 0.96, 0.97, 0.97, 0.98, 0.98, 0.99, 1.10].map(Some));
        assert_eq!(r.verdict(), Some(Verdict::Below));
        assert_eq!(r.to_string(), "0.97 [0.90 – 1.10]; 95 % 0.93 – 0.99: below");
        // One round more, above 1: the interval (2nd to 10th of 11) holds 1.
        let r = RoundRatios::of(
            [
                0.90, 0.93, 0.95, 0.96, 0.97, 0.97, 0.98, 0.98, 0.99, 1.02, 1.10,
            ]
            .map(Some),
        );
        assert_eq!(r.verdict(), Some(Verdict::NotResolved));
        // Six rounds all above: the whole range is the interval, above 1.
        let r = RoundRatios::of([1.01, 1.02, 1.05, 1.08, 1.10, 1.20].map(Some));
        assert_eq!(r.verdict(), Some(Verdict::Above));
        // Five rounds (a missing figure not counted): a spread, no verdict.
        let r = RoundRatios::of([
            Some(0.9),
            Some(0.91),
            None,
            Some(0.92),
            Some(0.93),
            Some(0.94),
        ]);
        assert_eq!(r.verdict(), None);
        assert_eq!(r.to_string(), "0.92 [0.90 – 0.94]");
        assert_eq!(RoundRatios::of([None]).to_string(), "–");
    }

    #[test]
    fn percentiles_interpolate_between_closest_ranks_in_microseconds() {
        // 1..=101 µs: h = 100·q, so p50 = 51, p90 = 91, p99 = 100, p99.9 = 100.9.
        let ns: Vec<i64> = (1..=101).rev().map(|v| v * 1000).collect();
        let d = Dist::of_ns(&ns);
        assert_eq!(d.n, 101);
        assert_eq!(d.at("p50"), Some(51.0));
        assert_eq!(d.at("p90"), Some(91.0));
        assert_eq!(d.at("p99"), Some(100.0));
        assert!((d.at("p99.9").unwrap() - 100.9).abs() < 1e-9);
        assert_eq!(d.at("max"), Some(101.0));
        assert_eq!(d.at("p42"), None);
    }

    #[test]
    fn no_samples_give_no_percentiles_not_zero() {
        let d = Dist::of_ns(&[]);
        assert_eq!(d.q, [None; 5]);
        assert_eq!(d.minus(&Dist::of_ns(&[5_000])), [None; 5]);
        assert_eq!(paired_median(&vec![vec![None]], &vec![vec![Some(1)]]), None);
        assert_eq!(Spread::of([None, None]), None);
    }

    #[test]
    fn added_latency_is_the_difference_at_the_same_percentile() {
        let direct = Dist::of_ns(&[10_000, 20_000, 30_000]);
        let proxy = Dist::of_ns(&[15_000, 27_000, 90_000]);
        let added = proxy.minus(&direct);
        assert_eq!(added[0], Some(7.0)); // p50: 27 − 20
        assert_eq!(added[4], Some(60.0)); // max: 90 − 30
    }

    #[test]
    fn pairing_uses_only_chunks_both_rounds_received() {
        let path = vec![vec![None, Some(50_000), Some(70_000)], vec![Some(40_000)]];
        let base = vec![vec![Some(1), Some(10_000), None], vec![Some(20_000)]];
        // Pairs: (50, 10) → 40 and (40, 20) → 20; the median of two interpolates.
        assert_eq!(paired_median(&path, &base), Some(30.0));
        assert_eq!(flatten(&path), vec![50_000, 70_000, 40_000]);
    }

    #[test]
    fn spread_is_median_min_max_of_the_rounds() {
        let s = Spread::of([Some(3.0), None, Some(1.0), Some(2.0)]).unwrap();
        assert_eq!((s.median, s.min, s.max), (2.0, 1.0, 3.0));
        assert_eq!(spread(Some(s)), "2.0 [1.0 – 3.0]");
        assert_eq!(us(Some(1234.4)), "1234");
        assert_eq!(us(None), "–");
    }
}

#[cfg(test)]
mod nginx_conf_tests {
    use std::path::Path;

    use crate::nginx_conf::*;

    #[test]
    fn the_config_streams_keeps_upstreams_alive_and_writes_only_under_dir() {
        let c = nginx_conf(
            Path::new("/tmp/b"),
            "127.0.0.1:4001".parse().unwrap(),
            "127.0.0.1:4002".parse().unwrap(),
            None,
        );
        for line in [
            "daemon off;",
            "worker_processes auto;",
            "proxy_buffering off;",
            "proxy_http_version 1.1;",
            "proxy_set_header Connection \"\";",
            "keepalive 1024;",
            "listen 127.0.0.1:4001;",
            "server 127.0.0.1:4002;",
            "pid /tmp/b/nginx.pid;",
        ] {
            assert!(c.contains(line), "missing `{line}` in\n{c}");
        }
        // Every path nginx writes is under the directory.
        for w in c
            .split_whitespace()
            .filter(|w| w.len() > 1 && w.starts_with('/'))
        {
            assert!(w.starts_with("/tmp/b/"), "{w} is outside the directory");
        }
        // Braces balance (nginx refuses the file otherwise).
        assert_eq!(c.matches('{').count(), c.matches('}').count());
    }

    #[test]
    fn workers_set_nginx_worker_processes_in_place_of_auto() {
        let at = |w| {
            nginx_conf(
                Path::new("/tmp/b"),
                "127.0.0.1:4001".parse().unwrap(),
                "127.0.0.1:4002".parse().unwrap(),
                w,
            )
        };
        let one = at(Some(1));
        assert!(one.contains("\nworker_processes 1;\n"), "{one}");
        assert!(!one.contains("auto"), "{one}");
        // Nothing else changes.
        assert_eq!(
            one.replace("worker_processes 1;", "worker_processes auto;"),
            at(None)
        );
        assert!(at(Some(16)).contains("\nworker_processes 16;\n"));
    }
}

#[cfg(test)]
mod litellm_conf_tests {
    use crate::litellm_conf::*;

    #[test]
    fn the_litellm_config_routes_the_clients_model_to_the_upstream_with_logging_off() {
        let c = litellm_conf("127.0.0.1:4002".parse().unwrap());
        for line in [
            "  - model_name: bench-model",
            "      model: openai/bench-model",
            "      api_base: http://127.0.0.1:4002/v1",
            "  turn_off_message_logging: true",
            "  callbacks: []",
            "  success_callback: []",
            "  failure_callback: []",
        ] {
            assert!(c.lines().any(|l| l == line), "missing `{line}` in\n{c}");
        }
        // The client asks for the model the config routes.
        assert!(crate::client::BODY.contains(&format!("\"model\":\"{MODEL}\"")));
        // Nothing that would reach beyond the loopback upstream.
        assert!(!c.contains("https://"));
        assert!(ENV.contains(&("LITELLM_LOCAL_MODEL_COST_MAP", "True")));
    }
}

#[cfg(test)]
mod client_tests {
    use crate::client::*;

    #[test]
    fn chunked_bodies_decode_across_any_split_of_the_bytes() {
        let wire = b"5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\n\r\n";
        for split in 0..wire.len() {
            let (mut dec, mut raw, mut body) = (Chunked::default(), Vec::new(), Vec::new());
            raw.extend_from_slice(&wire[..split]);
            let early = dec.decode(&mut raw, &mut body).unwrap();
            raw.extend_from_slice(&wire[split..]);
            let ended = dec.decode(&mut raw, &mut body).unwrap();
            assert!(!early || split == wire.len(), "ended early at {split}");
            assert!(ended, "split at {split}");
            assert_eq!(body, b"hello, world", "split at {split}");
        }
        let mut raw = b"zz\r\n".to_vec();
        assert!(
            Chunked::default()
                .decode(&mut raw, &mut Vec::new())
                .is_err()
        );
    }

    #[test]
    fn a_dump_has_one_line_per_measured_chunk_with_its_send_and_due_instants() {
        let mut out = StreamOut::new(3);
        let mut done = false;
        let ev = r#"data: {"choices":[],"bench":{"seq":2,"sent_ns":400,"due_ns":350,"req":1}}"#;
        event(ev.as_bytes(), 1_000, &(1..3), &mut out, &mut done);
        let other = StreamOut::default();
        let mut buf = Vec::new();
        dump(&mut buf, &[other, out]).unwrap();
        assert_eq!(
            String::from_utf8(buf).unwrap(),
            "stream\tseq\tsent_ns\tlatency_ns\tdue_ns\n1\t2\t400\t600\t350\n"
        );
    }

    /// The upstream's lateness is what shows that two paths' rounds got the
    /// same load: it is taken over the measured chunks only, and a chunk that
    /// does not say when it was due counts as on time, not as late by its
    /// whole send instant.
    #[test]
    fn the_upstreams_lateness_is_send_less_due_over_the_measured_chunks() {
        let mut out = StreamOut::new(4);
        let mut done = false;
        for ev in [
            r#"data: {"bench":{"seq":0,"sent_ns":9000,"due_ns":100,"req":1}}"#,
            r#"data: {"bench":{"seq":1,"sent_ns":500,"due_ns":480,"req":1}}"#,
            r#"data: {"bench":{"seq":2,"sent_ns":900,"due_ns":600,"req":1}}"#,
            r#"data: {"bench":{"seq":3,"sent_ns":950,"req":1}}"#,
        ] {
            event(ev.as_bytes(), 2_000, &(1..4), &mut out, &mut done);
        }
        assert_eq!(lateness(&[out]), vec![20, 300, 0]);
    }

    #[test]
    fn events_give_latency_usage_and_end_and_measure_only_the_range() {
        let mut out = StreamOut::new(3);
        let mut done = false;
        let chunk = |seq: u32, sent: u64| {
            format!(
                r#"data: {{"choices":[{{"delta":{{"content":" w"}}}}],"usage":null,"bench":{{"seq":{seq},"sent_ns":{sent},"req":1}}}}"#
            )
        };
        event(
            chunk(0, 100).as_bytes(),
            1_000,
            &(1..3),
            &mut out,
            &mut done,
        );
        event(
            chunk(2, 400).as_bytes(),
            1_000,
            &(1..3),
            &mut out,
            &mut done,
        );
        // Past the measured range: counted, not measured.
        event(
            chunk(3, 400).as_bytes(),
            1_000,
            &(1..3),
            &mut out,
            &mut done,
        );
        event(
            br#"data: {"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}}"#,
            1_000,
            &(1..3),
            &mut out,
            &mut done,
        );
        assert!(!done);
        event(b"data: [DONE]", 1_000, &(1..3), &mut out, &mut done);
        assert!(done);
        assert_eq!(out.lat, vec![None, None, Some(600)]);
        assert_eq!(out.chunks, 3);
        assert_eq!(out.usage_tokens, Some(3));
        assert_eq!(out.span, Some((1_000, 1_000)));
    }
}

#[cfg(test)]
mod ticker_tests {
    use std::os::fd::AsRawFd;
    use std::time::Duration;

    /// The upstream's millisecond clock: its timerfd keeps expiring on its own
    /// (a one-shot timer would tick once and leave tokio's drifting wakes).
    #[test]
    fn the_upstreams_clock_expires_every_period_without_being_rearmed() {
        let fd = crate::upstream::timerfd(Duration::from_millis(1)).expect("a timerfd");
        let mut total = 0u64;
        for _ in 0..2 {
            std::thread::sleep(Duration::from_millis(5));
            let mut n = [0u8; 8];
            // SAFETY: reads at most 8 bytes into a buffer of 8.
            let r = unsafe { libc::read(fd.as_raw_fd(), n.as_mut_ptr().cast(), 8) };
            assert_eq!(r, 8, "no expiry after 5 ms");
            let count = u64::from_ne_bytes(n);
            assert!(count >= 1);
            total += count;
        }
        assert!(total >= 2, "{total}");
    }
}

#[cfg(test)]
mod schedule_tests {
    use std::time::Duration;

    use crate::schedule::*;

    #[test]
    fn every_measured_chunk_is_sent_while_all_streams_are_open() {
        for (period_ms, n, chunks, warmup) in
            [(50, 1000, 200, 20), (1000, 1000, 25, 3), (7, 13, 400, 0)]
        {
            let period = Duration::from_millis(period_ms);
            let r = ramp(period);
            let m = measured(warmup, chunks, r);
            assert!(!m.is_empty());
            let starts: Vec<Duration> = (0..n).map(|i| start_offset(i, n, period, r)).collect();
            let last_open = *starts.iter().max().unwrap();
            // Chunk k of a stream goes one period after chunk k − 1, the first one
            // period after the stream's request.
            let first_end = starts.iter().min().unwrap().as_secs_f64()
                + f64::from(chunks) * period.as_secs_f64();
            for s in &starts {
                let sent = |k: u32| s.as_secs_f64() + f64::from(k + 1) * period.as_secs_f64();
                assert!(sent(m.start) > last_open.as_secs_f64(), "{period_ms} ms");
                assert!(sent(m.end - 1) < first_end, "{period_ms} ms");
            }
        }
    }

    #[test]
    fn connects_spread_over_about_a_second_and_phases_stay_even() {
        let period = Duration::from_millis(50);
        assert_eq!(ramp(period), 20);
        assert_eq!(ramp(Duration::from_secs(2)), 1);
        let n = 1000;
        let mut phases: Vec<u128> = (0..n)
            .map(|i| start_offset(i, n, period, 20).as_micros() % 50_000)
            .collect();
        phases.sort_unstable();
        // Phase i/n of the period: one stream every 50 µs.
        for (i, p) in phases.iter().enumerate() {
            assert!(p.abs_diff(i as u128 * 50) <= 1, "stream {i}: {p}");
        }
        let last = (0..n)
            .map(|i| start_offset(i, n, period, 20))
            .max()
            .unwrap();
        assert!(last < Duration::from_secs(1));
        assert_eq!(measured(3, 200, 20), 20..180);
        assert_eq!(measured(30, 200, 20), 30..180);
        // Too few chunks for the ramp: nothing to measure (the options refuse it).
        assert!(measured(3, 25, 20).is_empty());
    }
}

#[cfg(test)]
mod pool_tests {
    use crate::path::PathKind;
    use crate::pool::*;

    fn fig(run: &str, round: u32, path: &str, p50: f64, cpu: Option<f64>) -> Figures {
        Figures {
            run: run.into(),
            round,
            path: PathKind::from_name(path).unwrap(),
            program: if path == "direct" {
                String::new()
            } else {
                format!("/bin/{path}")
            },
            p50_us: Some(p50),
            p99_us: Some(p50 * 3.0),
            cpu_us: cpu,
            user_us: cpu.map(|c| c / 5.0),
        }
    }

    #[test]
    fn a_rounds_log_reads_back_what_was_appended_and_keeps_its_header_once() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("rounds.tsv");
        let a = fig("100-1", 1, "tpscope", 150.5, Some(12.25));
        let mut b = fig("100-1", 1, "direct", 30.0, None);
        b.p99_us = None;
        append(&file, std::slice::from_ref(&a)).unwrap();
        append(&file, std::slice::from_ref(&b)).unwrap();
        let text = std::fs::read_to_string(&file).unwrap();
        assert_eq!(text.matches("run\tround").count(), 1, "{text}");
        assert_eq!(parse("rounds.tsv", &text).unwrap(), vec![a.clone(), b]);
        // An empty file (made with `touch`) becomes a log.
        let touched = dir.path().join("touched.tsv");
        std::fs::write(&touched, "").unwrap();
        append(&touched, std::slice::from_ref(&a)).unwrap();
        let text = std::fs::read_to_string(&touched).unwrap();
        assert_eq!(parse("touched.tsv", &text).unwrap(), vec![a]);
    }

    #[test]
    fn a_file_that_is_not_a_rounds_log_is_neither_appended_to_nor_pooled() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("notes.txt");
        std::fs::write(&file, "my notes\n").unwrap();
        let e = append(&file, &[fig("1-1", 1, "tpscope", 1.0, None)]).unwrap_err();
        assert!(
            e.contains("notes.txt") && e.contains("not a rounds log"),
            "{e}"
        );
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "my notes\n");
        let e = parse("notes.txt", "my notes\n").unwrap_err();
        assert!(e.starts_with("notes.txt:1: not a rounds log"), "{e}");
    }

    #[test]
    fn a_bad_row_is_named_by_file_line_and_field() {
        let row = |r: &str| format!("{HEADER}\n{r}\n");
        let e = parse("l.tsv", &row("1-1\tthree\ttpscope\t/t\t1\t2\t3\t4")).unwrap_err();
        assert_eq!(e, "l.tsv:2: round `three`: expected a round number");
        let e = parse("l.tsv", &row("1-1\t3\ttpscope\t/t\t1\tfast\t3\t4")).unwrap_err();
        assert_eq!(e, "l.tsv:2: p99_us `fast`: expected a number or nothing");
        let e = parse("l.tsv", &row("1-1\t3\ttpscope")).unwrap_err();
        assert!(e.starts_with("l.tsv:2: 3 fields, expected 8"), "{e}");
    }

    #[test]
    fn pooled_rounds_pair_within_their_own_run_only() {
        // Two runs with the same round number: run A's tpscope adds 20 µs
        // where nginx adds 10 (2.0), run B's 5 where nginx adds 20 (0.25).
        // Pairing across runs would give 0.5 or 1.0 instead.
        let rows = vec![
            fig("A", 1, "direct", 10.0, None),
            fig("A", 1, "tpscope", 30.0, Some(10.0)),
            fig("A", 1, "nginx", 20.0, Some(20.0)),
            fig("B", 1, "nginx", 30.0, None),
            fig("B", 1, "direct", 10.0, None),
            fig("B", 1, "tpscope", 15.0, Some(12.0)),
        ];
        let lines = ratio_lines(&rows);
        assert_eq!(lines[0], "tpscope / nginx, 2 rounds of 2 runs:");
        assert!(
            lines[3].starts_with("  added p50") && lines[3].contains("[0.25 – 2.00]"),
            "{lines:?}"
        );
        assert!(lines[4].contains("[0.25 – 2.00]"), "{lines:?}");
        // Run B's nginx has no CPU figure: one CPU ratio (0.5), not two.
        assert!(
            lines[1].starts_with("  CPU per token 0.50 [0.50 – 0.50]"),
            "{lines:?}"
        );
        assert_eq!(lines.len(), 5, "no baseline or LiteLLM rounds: {lines:?}");
        let progs = programs(&rows);
        assert_eq!(progs.len(), 2, "{progs:?}");
        // One run's rounds: no run count in the heading.
        assert_eq!(ratio_lines(&rows[..3])[0], "tpscope / nginx, 1 rounds:");
        assert!(ratio_lines(&rows[..2]).is_empty());
    }
}

#[cfg(test)]
mod kernel_tests {
    use crate::kernel::*;

    fn guest(pack: Option<i64>, poll: Option<u64>) -> Kernel {
        Kernel {
            release: Some("6.18.44-fc".into()),
            vcpu_pack: pack,
            halt_poll_ns: poll,
        }
    }

    #[test]
    fn a_packing_guest_is_named_and_warned_of_only_at_normal_priority() {
        let normal = kernel_line(&guest(Some(15), Some(0)), false, false);
        assert!(
            normal.starts_with(
                "kernel: 6.18.44-fc; vCPU packing (sched_vcpu_pack) 15; \
                 idle vCPUs halt without polling (guest_halt_poll_ns 0)\n"
            ),
            "{normal}"
        );
        assert!(
            normal.contains("run under chrt -f 10 or with --pin apart"),
            "{normal}"
        );
        // Real-time threads are placed by their own class: no warning.
        let fifo = kernel_line(&guest(Some(15), Some(0)), true, false);
        assert!(!fifo.contains('\n'), "{fifo}");
        // Pinned apart, the kernel has no CPU to choose: no warning.
        assert!(!kernel_line(&guest(Some(15), Some(0)), false, true).contains('\n'));
        // Packing off: named, nothing to warn of.
        assert!(!kernel_line(&guest(Some(0), None), false, false).contains('\n'));
    }

    #[test]
    fn a_stock_kernel_gets_its_release_alone() {
        assert_eq!(
            kernel_line(&guest(None, None), false, false),
            "kernel: 6.18.44-fc"
        );
        assert_eq!(
            kernel_line(&guest(None, Some(200_000)), false, false),
            "kernel: 6.18.44-fc; idle vCPUs poll 200000 ns before they halt"
        );
        assert_eq!(kernel_line(&Kernel::default(), true, false), "kernel: ?");
    }

    #[test]
    fn a_knob_file_is_its_one_number() {
        assert_eq!(knob::<i64>("15\n"), Some(15));
        assert_eq!(knob::<u64>(" 0 \n"), Some(0));
        assert_eq!(knob::<u64>("off\n"), None);
    }
}

#[cfg(test)]
mod pin_tests {
    use crate::pin::*;

    #[test]
    fn three_or_more_cpus_give_each_part_its_own() {
        let p = plan(&[0, 1, 2, 3]).unwrap();
        assert_eq!(
            p,
            Pins {
                upstream: 0,
                client: 1,
                proxy: vec![2, 3]
            }
        );
        assert_eq!(
            p.describe(),
            "pinned apart (--pin apart): upstream on CPU 0, client on CPU 1, each proxy on CPUs 2-3"
        );
        // The CPUs this process may run on, not 0..n: a taskset of 4,6,7,9.
        let p = plan(&[4, 6, 7, 9]).unwrap();
        assert!(p.describe().ends_with("each proxy on CPUs 7,9"));
        assert_eq!((p.upstream, p.client, p.proxy), (4, 6, vec![7, 9]));
    }

    #[test]
    fn two_cpus_keep_the_proxy_apart_from_the_benchmark() {
        let p = plan(&[0, 1]).unwrap();
        assert_eq!((p.upstream, p.client, p.proxy.clone()), (0, 0, vec![1]));
        assert_eq!(
            p.describe(),
            "pinned apart (--pin apart): upstream and client on CPU 0 (with 2 CPUs they share it), each proxy on CPU 1"
        );
    }

    #[test]
    fn one_cpu_is_refused_naming_the_flag_and_the_cpus() {
        let e = plan(&[3]).unwrap_err();
        assert!(e.starts_with("--pin apart: needs at least 2 CPUs"), "{e}");
        assert!(e.contains("may run on 3 "), "{e}");
        assert!(plan(&[]).unwrap_err().contains("may run on none"));
    }

    #[test]
    fn cpu_lists_are_written_as_taskset_reads_them() {
        assert_eq!(cpu_list(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
        assert_eq!(cpu_list(&[5]), "5");
        assert_eq!(cpu_list(&[]), "none");
    }
}
