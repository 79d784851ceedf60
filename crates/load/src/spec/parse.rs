//! The value parsers of the bench flags ([`super::Flags`]): each turns one flag's
//! text into its value, or says what was expected; clap calls them (feature
//! `clap`), and so can any other front end.

use std::path::PathBuf;
use std::time::Duration;

use tpscope_client::{Api, RxTimestamps};
use tpscope_model::units::{Warmup, parse_duration, parse_warmup};
use tpscope_record::Dispatch;

use super::{DatasetName, Limit};
use crate::dist::{Column, LengthDist};
use crate::ramp::Ramp;
use crate::schedule::Arrival;
use crate::workload::trace::{TraceFormat, parse_trace_arg};

/// `--timeout-first-token`, `--timeout-stall`: a time above 0, or `none`.
pub fn parse_limit(s: &str) -> Result<Limit, String> {
    match s.trim() {
        "none" | "off" => Ok(Limit(None)),
        t => match parse_duration(t) {
            Ok(d) if d.is_zero() => Err(format!("`{s}` is 0 (give a time > 0, or none)")),
            Ok(d) => Ok(Limit(Some(d))),
            Err(e) => Err(format!("{e} (or none for no limit)")),
        },
    }
}

/// `--max-error-rate`: a fraction (0.05) or a percentage (5%).
pub fn parse_error_rate(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let (num, scale) = match t.strip_suffix('%') {
        Some(p) => (p.trim(), 100.0),
        None => (t, 1.0),
    };
    match num.parse::<f64>().map(|v| v / scale) {
        Ok(v) if (0.0..=1.0).contains(&v) => Ok(v),
        _ => Err(format!(
            "`{s}` must be a fraction from 0 to 1 (0.05) or a percentage from 0% to 100% (5%)"
        )),
    }
}

/// `--dataset-name`: vLLM's names that tpscope has.
pub fn parse_dataset_name(s: &str) -> Result<DatasetName, String> {
    s.parse().map_err(|e: super::BadDatasetName| e.to_string())
}

/// `--api`.
pub fn parse_api(s: &str) -> Result<Api, String> {
    s.parse().map_err(|e: tpscope_client::BadApi| e.to_string())
}

/// `--rx-timestamps`.
pub fn parse_rx_timestamps(s: &str) -> Result<RxTimestamps, String> {
    s.parse()
        .map_err(|e: tpscope_client::BadRxTimestamps| e.to_string())
}

/// `--header`: `Name: value`.
pub fn parse_header(s: &str) -> Result<(String, String), String> {
    let (k, v) = s
        .split_once(':')
        .ok_or_else(|| format!("`{s}` is not a header (expected Name:value)"))?;
    let k = k.trim();
    if k.is_empty()
        || !k
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b))
    {
        return Err(format!("`{k}` is not a header name"));
    }
    Ok((k.to_string(), v.trim().to_string()))
}

/// `--extra-body`: a JSON object.
pub fn parse_extra_body(s: &str) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    match serde_json::from_str::<serde_json::Value>(s) {
        Ok(serde_json::Value::Object(m)) => Ok(m),
        Ok(_) => Err("expected a JSON object, e.g. '{\"ignore_eos\": true}'".into()),
        Err(e) => Err(format!("not valid JSON: {e}")),
    }
}

/// `--input-tokens`: N or a distribution.
pub fn parse_input_dist(s: &str) -> Result<LengthDist, String> {
    LengthDist::parse(s, Column::Input).map_err(|e| e.to_string())
}

/// `--output-tokens`: N or a distribution.
pub fn parse_output_dist(s: &str) -> Result<LengthDist, String> {
    LengthDist::parse(s, Column::Output).map_err(|e| e.to_string())
}

/// `--turns`: N or a distribution.
pub fn parse_turns(s: &str) -> Result<LengthDist, String> {
    LengthDist::parse(s, Column::Output).map_err(|e| e.to_string())
}

/// `--think-time`.
pub fn parse_think_time(s: &str) -> Result<crate::workload::sessions::ThinkTime, String> {
    s.parse()
        .map_err(|e: crate::workload::sessions::BadThinkTime| e.to_string())
}

/// A finite number ≥ 0 (`--temperature`).
pub fn parse_non_negative(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!("`{s}` is not a number ≥ 0")),
    }
}

/// A whole number ≥ 1 (`--concurrency`, `--prefix-len`, `--prefix-count`).
pub fn parse_positive_u32(s: &str) -> Result<u32, String> {
    match s.trim().parse::<u32>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("`{s}` must be a whole number ≥ 1")),
    }
}

/// A whole number ≥ 1 (`--requests`, `--sessions`).
pub fn parse_positive_u64(s: &str) -> Result<u64, String> {
    match s.trim().parse::<u64>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("`{s}` must be a whole number ≥ 1")),
    }
}

/// A count that may be 0 (`--max-retries`, `--seed`).
pub fn parse_count<T: std::str::FromStr>(s: &str) -> Result<T, String> {
    s.trim()
        .parse::<T>()
        .map_err(|_| format!("`{s}` must be a whole number ≥ 0"))
}

/// A duration (the one grammar of `tpscope_model::units`).
pub fn parse_duration_arg(s: &str) -> Result<Duration, String> {
    parse_duration(s).map_err(|e| e.to_string())
}

/// `--timeout-total`: a time limit (0 would end every request before it starts).
pub fn parse_limit_above_zero(s: &str) -> Result<Duration, String> {
    let d = parse_duration_arg(s)?;
    if d.is_zero() {
        return Err(format!(
            "`{s}` leaves no time for a request (give a limit above 0, e.g. 60s, or leave it \
             out for none)"
        ));
    }
    Ok(d)
}

/// `--sample-interval`: at least 1ms.
pub fn parse_sample_interval(s: &str) -> Result<Duration, String> {
    let d = parse_duration_arg(s)?;
    if d < Duration::from_millis(1) {
        return Err(format!("`{s}` is shorter than 1ms"));
    }
    Ok(d)
}

/// `--rate`: requests per second, or `inf` (`None`: a closed loop).
pub fn parse_rate(s: &str) -> Result<Option<f64>, String> {
    let t = s.trim();
    if t == "inf" {
        return Ok(None);
    }
    match t.parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 && r <= 1e6 => Ok(Some(r)),
        // A number, but more than one client can pace: say the bound it breaks.
        Ok(r) if r > 1e6 => Err(format!(
            "`{s}` requests per second is more than one client can pace (at most 1000000); \
             for everything at once give inf"
        )),
        _ => Err(format!(
            "`{s}` is not a rate (expected requests per second > 0, or inf)"
        )),
    }
}

/// `--arrival`.
pub fn parse_arrival(s: &str) -> Result<Arrival, String> {
    s.parse::<Arrival>().map_err(|e| e.to_string())
}

/// `--ramp-up`.
pub fn parse_ramp(s: &str) -> Result<Ramp, String> {
    s.parse::<Ramp>().map_err(|e| e.to_string())
}

/// `--burstiness`: a gamma shape.
pub fn parse_burstiness(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(f) if f.is_finite() && f > 0.0 && f <= 1e6 => Ok(f),
        _ => Err(format!(
            "`{s}` is not a gamma shape (expected a number > 0)"
        )),
    }
}

/// `--warmup`: N requests or a time.
pub fn parse_warmup_arg(s: &str) -> Result<Warmup, String> {
    parse_warmup(s).map_err(|e| e.to_string())
}

/// `--dispatch`.
pub fn parse_dispatch(s: &str) -> Result<Dispatch, String> {
    s.parse::<Dispatch>().map_err(|e| e.to_string())
}

/// `--label`: `key=value`.
pub fn parse_label(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
        _ => Err(format!("`{s}` is not a label (expected key=value)")),
    }
}

/// `--tokenizer`.
pub fn parse_tokenizer(s: &str) -> Result<tpscope_tokens::Tokenizer, String> {
    s.parse()
        .map_err(|e: tpscope_tokens::TokenizerError| e.to_string())
}

/// `--trace`: KIND:FILE.
pub fn parse_trace(s: &str) -> Result<(TraceFormat, PathBuf), String> {
    parse_trace_arg(s).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_temperature_is_a_finite_number_not_below_zero() {
        assert_eq!(parse_non_negative("0"), Ok(0.0));
        assert_eq!(parse_non_negative(" 0.7 "), Ok(0.7));
        for bad in ["-0.1", "nan", "inf", "warm"] {
            assert!(
                parse_non_negative(bad).unwrap_err().contains("≥ 0"),
                "{bad}"
            );
        }
    }

    #[test]
    fn negative_numbers_are_named_with_their_bound() {
        assert!(
            parse_positive_u32("-3")
                .unwrap_err()
                .contains("must be a whole number ≥ 1")
        );
        assert!(parse_count::<u32>("-1").unwrap_err().contains("≥ 0"));
        assert!(parse_rate("-2").unwrap_err().contains("> 0"));
        assert_eq!(parse_error_rate("5%"), Ok(0.05));
        assert_eq!(parse_error_rate("0.1"), Ok(0.1));
        assert!(parse_error_rate("-0.1").is_err());
        assert!(parse_error_rate("150%").is_err());
        assert_eq!(parse_limit("none"), Ok(Limit(None)));
        assert_eq!(parse_limit("2s"), Ok(Limit(Some(Duration::from_secs(2)))));
        assert!(parse_limit("0s").is_err());
    }

    #[test]
    fn value_parsers_explain_bad_values() {
        assert!(parse_header("X-A: b").is_ok());
        assert!(parse_header("nocolon").unwrap_err().contains("Name:value"));
        assert!(parse_extra_body("[1]").unwrap_err().contains("JSON object"));
        assert!(parse_rate("0").is_err());
        assert_eq!(parse_rate("inf").unwrap(), None);
        assert!(parse_sample_interval("100us").is_err());
        assert_eq!(parse_rx_timestamps("user"), Ok(RxTimestamps::User));
        assert!(
            parse_rx_timestamps("hw")
                .unwrap_err()
                .contains("expected kernel or user")
        );
    }
}
