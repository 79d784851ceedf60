//! The HTML pages in a real browser: Debian's headless `chromium` opens the page of
//! a report and of a comparison, and the test checks that every chart rendered with
//! a size and marks, that the page logged no error, and saves screenshots (light
//! and dark) under the cargo target dir (`target/tmp/html_browser/`).
//!
//! Needs `chromium` on PATH (`apt-get install -y chromium`); without it the test is
//! skipped with a message on the terminal, unless `TPSCOPE_REQUIRE_BROWSER=1` is set
//! (as CI does), which makes a missing browser a failure.

mod compare_support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use compare_support::*;
use tpscope_analysis::detail::detail;
use tpscope_analysis::{Options, REPORT_SCHEMA, Report, analyze};

fn find_browser() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    for dir in std::env::split_paths(&path) {
        for name in ["chromium", "chromium-browser"] {
            let p = dir.join(name);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

/// The browser, or `None` when the test is to be skipped: on a machine without
/// `chromium` (the README's test command must pass with only Rust installed) it says
/// so on the terminal; with `TPSCOPE_REQUIRE_BROWSER=1` (CI) a missing browser fails.
fn browser() -> Option<PathBuf> {
    if let Some(b) = find_browser() {
        return Some(b);
    }
    let how =
        "install Debian's headless browser with `apt-get update && apt-get install -y chromium`";
    if std::env::var("TPSCOPE_REQUIRE_BROWSER").is_ok_and(|v| v == "1") {
        panic!("html_browser: `chromium` is not on PATH and TPSCOPE_REQUIRE_BROWSER=1: {how}");
    }
    // Written to the stream itself, not with `eprintln!`, which the test harness
    // captures and hides for a passing test.
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "html_browser: SKIPPED, `chromium` is not on PATH ({how}; set TPSCOPE_REQUIRE_BROWSER=1 to make this a failure)"
    );
    None
}

/// Runs the browser on a page with extra flags; returns (stdout, stderr). The
/// browser is stopped if it takes longer than a minute.
fn run_browser(bin: &Path, work: &Path, page: &Path, extra: &[String]) -> (String, String) {
    let profile = work.join(format!(
        "profile-{}",
        extra.len() + page.to_string_lossy().len() * 7 + std::process::id() as usize
    ));
    let _ = std::fs::remove_dir_all(&profile);
    std::fs::create_dir_all(&profile).unwrap();
    let out_path = work.join("browser.stdout");
    let err_path = work.join("browser.stderr");
    let mut child = Command::new(bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .expect("start chromium");
    let started = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within 60 s on {}", page.display());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = std::fs::remove_dir_all(&profile);
    (
        std::fs::read_to_string(&out_path).unwrap_or_default(),
        std::fs::read_to_string(&err_path).unwrap_or_default(),
    )
}

/// The text of the element with `id` in a dumped DOM.
fn element_text(dom: &str, id: &str) -> Option<String> {
    let at = dom.find(&format!("id=\"{id}\""))?;
    let rest = &dom[at..];
    let start = rest.find('>')? + 1;
    let end = rest.find("</pre>")?;
    Some(
        rest[start..end]
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&amp;", "&"),
    )
}

/// Opens a page, checks it, and saves light and dark screenshots.
fn check_page(bin: &Path, work: &Path, page: &Path, name: &str, expect_charts: usize) {
    let (dom, log) = run_browser(bin, work, page, &["--dump-dom".to_string()]);
    assert!(
        dom.contains("</html>"),
        "no DOM dumped for {name}; browser log:\n{log}"
    );
    let errors = element_text(&dom, "tpscope-errors").expect("errors element");
    assert!(
        errors.trim().is_empty(),
        "{name}: the page reported script errors:\n{errors}"
    );
    let console: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("CONSOLE") || l.contains("Uncaught"))
        .collect();
    assert!(
        console.is_empty(),
        "{name}: the page logged to the console:\n{}",
        console.join("\n")
    );

    let check = element_text(&dom, "tpscope-check").expect("check element");
    let lines: Vec<&str> = check.lines().collect();
    assert_eq!(
        lines.last().copied(),
        Some(format!("charts {expect_charts}").as_str()),
        "{name}:\n{check}"
    );
    let charts: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.starts_with("chart "))
        .collect();
    assert_eq!(charts.len(), expect_charts, "{name}:\n{check}");
    for line in charts {
        // chart <id> <w>x<h> marks=<n> empty=<0|1>
        let parts: Vec<&str> = line.split_whitespace().collect();
        let (w, h) = parts[2].split_once('x').unwrap();
        let (w, h): (f64, f64) = (w.parse().unwrap(), h.parse().unwrap());
        assert!(
            w >= 300.0 && h >= 100.0,
            "{name}: chart rendered too small: {line}"
        );
        let marks: usize = parts[3].trim_start_matches("marks=").parse().unwrap();
        assert_eq!(parts[4], "empty=0", "{name}: chart has no data: {line}");
        assert!(marks > 0, "{name}: chart drew nothing: {line}");
    }

    for (scheme, flags) in [
        ("light", vec![]),
        (
            "dark",
            vec!["--blink-settings=preferredColorScheme=0".to_string()],
        ),
    ] {
        let shot = work.join(format!("{name}-{scheme}.png"));
        let _ = std::fs::remove_file(&shot);
        let mut args = vec![
            format!("--screenshot={}", shot.display()),
            "--window-size=1280,4000".to_string(),
        ];
        args.extend(flags);
        let (_, log) = run_browser(bin, work, page, &args);
        let size = std::fs::metadata(&shot).map(|m| m.len()).unwrap_or(0);
        assert!(
            size > 20_000,
            "{name}: no useful screenshot at {} ({size} bytes); log:\n{log}",
            shot.display()
        );
        eprintln!("html_browser: screenshot {}", shot.display());
    }
}

#[test]
fn report_and_compare_pages_render_in_chromium() {
    let Some(bin) = browser() else { return };
    let work = scratch("html_browser");
    let base = log(
        &work,
        "base.jsonl",
        "base",
        Load {
            refill_delay: 0.3,
            error_p: 0.03,
            retry_p: 0.05,
            ..Load::default()
        },
    );
    let cand = log(
        &work,
        "cand.jsonl",
        "cand",
        Load {
            stream_tps: 100.0,
            seed: 2,
            ..Load::default()
        },
    );

    // The report page, through the same reader and analysis as `tpscope report`.
    let set = tpscope_log::read_paths(std::slice::from_ref(&base), Default::default()).unwrap();
    let opts = Options {
        bucket: Some(Duration::from_secs(1)),
        ..Options::default()
    };
    let runs: Vec<_> = set.runs.iter().map(|r| analyze(&r.input, &opts)).collect();
    let details: Vec<_> = set
        .runs
        .iter()
        .zip(&runs)
        .map(|(r, rep)| detail(&r.input, rep))
        .collect();
    let report = Report {
        schema: REPORT_SCHEMA,
        runs,
        skipped: set.skipped.clone(),
        warnings: set.warnings.clone(),
        sweeps: Vec::new(),
    };
    let report_page = work.join("report.html");
    std::fs::write(
        &report_page,
        tpscope_render::html::report(&report, &details),
    )
    .unwrap();
    // Nine charts, and the capacity ledger's stacked area under the in-flight chart.
    check_page(&bin, &work, &report_page, "report", 10);

    // The comparison page, written by the binary.
    let cmp_page = work.join("compare.html");
    let o = tpscope(&[
        "compare",
        base.to_str().unwrap(),
        cand.to_str().unwrap(),
        "--html",
        cmp_page.to_str().unwrap(),
        "--resamples",
        "300",
    ]);
    assert!(matches!(o.status.code(), Some(0 | 1 | 3)), "{}", stderr(&o));
    check_page(&bin, &work, &cmp_page, "compare", 10);
}
