//! `vllm bench serve` command lines for `tpscope bench`: vLLM's flags, with vLLM's
//! meaning, rewritten into tpscope's before clap reads them (the bench flags stay
//! tpscope's own), and the settings of the vLLM result file (`--save-result`) that
//! `vllm_result` writes after the run. A vLLM flag tpscope does not take is refused
//! with the list of those it does (docs/vllm.md is that list, explained).

use std::ffi::OsString;
use std::path::PathBuf;

use anyhow::{Context, bail};

mod table;
#[cfg(test)]
mod tests;

pub use table::ACCEPTED;
use table::{REFUSED, Take, take};

/// What `--save-result` asks for.
#[derive(Clone, Debug, PartialEq)]
pub struct ResultSettings {
    /// The per-request arrays too (`--save-detailed`).
    pub detailed: bool,
    /// Where the file goes (vLLM's name unless `--result-filename`).
    pub dir: Option<PathBuf>,
    /// `--result-filename`.
    pub filename: Option<String>,
    /// `--backend` as given (default `openai`).
    pub backend: String,
    /// `--label`.
    pub label: Option<String>,
    /// vLLM's `--model` (the model id; the tokenizer's when a served name is given).
    pub model_id: Option<String>,
    /// `--percentile-metrics`.
    pub metrics: Vec<String>,
    /// `--metric-percentiles`.
    pub percentiles: Vec<f64>,
    /// `--metadata` pairs.
    pub metadata: Vec<(String, String)>,
    /// The span log the result is computed from (`--out`).
    pub log: PathBuf,
}

/// The translated command line, and the result file's settings when asked for.
#[derive(Debug)]
pub struct Translated {
    /// The arguments clap reads.
    pub args: Vec<OsString>,
    /// `--save-result`'s settings.
    pub result: Option<ResultSettings>,
}

/// The flag and its inline value of `--flag=value`.
fn split(arg: &str) -> (&str, Option<&str>) {
    match arg.split_once('=') {
        Some((f, v)) if f.starts_with("--") => (f, Some(v)),
        _ => (arg, None),
    }
}

/// Rewrites a `tpscope bench` command line that carries vLLM's flags. `known`:
/// the long flags (and aliases) `bench` has, without `--`. Other subcommands pass
/// unchanged.
pub fn translate(args: Vec<OsString>, known: &[String]) -> anyhow::Result<Translated> {
    let unchanged = |args| Translated { args, result: None };
    if args.get(1).and_then(|a| a.to_str()) != Some("bench") {
        return Ok(unchanged(args));
    }
    let Some(text) = args.iter().map(|a| a.to_str()).collect::<Option<Vec<_>>>() else {
        return Ok(unchanged(args));
    };
    let is_known = |f: &str| {
        known
            .iter()
            .any(|k| f.strip_prefix("--") == Some(k.as_str()))
    };
    let mut out: Vec<String> = text[..2].iter().map(|s| s.to_string()).collect();
    let mut st = State::default();
    let mut i = 2;
    while i < text.len() {
        let arg = text[i];
        i += 1;
        let (flag, inline) = split(arg);
        if !flag.starts_with("--") || flag == "--" {
            out.push(arg.to_string());
            continue;
        }
        if REFUSED.contains(&flag) || (!is_known(flag) && !ACCEPTED.iter().any(|(f, _)| *f == flag))
        {
            if REFUSED.contains(&flag) || st.vllm {
                bail!("{}", refusal(flag));
            }
            // Not vLLM's either: clap names it, with its own suggestion.
            out.push(arg.to_string());
            continue;
        }
        let native = take(flag) == Take::Native;
        // tpscope's own --tokenizer and --label when their values are tpscope's.
        let value_at = |i: usize| inline.or_else(|| text.get(i).copied());
        if flag == "--tokenizer" && value_at(i).is_some_and(tpscope_tokenizer) {
            out.push(arg.to_string());
            continue;
        }
        if flag == "--label" && value_at(i).is_some_and(|v| v.contains('=')) {
            out.push(arg.to_string());
            continue;
        }
        if native {
            out.push(arg.to_string());
            continue;
        }
        // tpscope has --goodput and --extra-body too: they alone do not make the
        // line vLLM's (which refuses unknown flags with vLLM's list).
        if !matches!(flag, "--goodput" | "--extra-body") {
            st.vllm = true;
        }
        match take(flag) {
            Take::Switch => st.switch(flag),
            Take::Value => {
                let v = match inline {
                    Some(v) => v,
                    None => {
                        let v = text
                            .get(i)
                            .with_context(|| format!("{flag}: a value is expected"))?;
                        i += 1;
                        v
                    }
                };
                st.value(flag, v, &mut out)?;
            }
            Take::Values => {
                let mut vals: Vec<&str> = inline.into_iter().collect();
                while i < text.len() && !text[i].starts_with("--") {
                    vals.push(text[i]);
                    i += 1;
                }
                if vals.is_empty() {
                    bail!("{flag}: a value is expected");
                }
                // vLLM's unquoted form (several words) is vLLM's.
                st.vllm |= vals.len() > 1;
                st.values(flag, &vals, &mut out)?;
            }
            Take::Native => unreachable!("handled above"),
        }
    }
    st.finish(out)
}

/// A `--tokenizer` value tpscope reads as it is.
fn tpscope_tokenizer(v: &str) -> bool {
    v.starts_with("hf:") || v == "o200k_base" || v == "cl100k_base"
}

/// The refusal of a flag tpscope does not take.
fn refusal(flag: &str) -> String {
    let names: Vec<&str> = ACCEPTED.iter().map(|(f, _)| *f).collect();
    format!(
        "{flag}: vLLM's flag is not taken by tpscope bench (see docs/vllm.md). The vLLM \
         flags it takes: {}",
        names.join(" ")
    )
}

/// What the vLLM flags said, gathered until the command line is read.
#[derive(Default)]
struct State {
    vllm: bool,
    save: bool,
    detailed: bool,
    host: Option<String>,
    port: Option<String>,
    backend: Option<String>,
    served: Option<String>,
    range_ratio: Option<f64>,
    body: serde_json::Map<String, serde_json::Value>,
    metrics: Option<Vec<String>>,
    percentiles: Option<Vec<f64>>,
    dir: Option<PathBuf>,
    filename: Option<String>,
    label: Option<String>,
    metadata: Vec<(String, String)>,
}

impl State {
    fn switch(&mut self, flag: &str) {
        match flag {
            "--save-result" => self.save = true,
            "--save-detailed" => self.detailed = true,
            // --disable-tqdm, --trust-remote-code: nothing to do.
            _ => {}
        }
    }

    fn value(&mut self, flag: &str, v: &str, out: &mut Vec<String>) -> anyhow::Result<()> {
        let number = |v: &str| -> anyhow::Result<f64> {
            v.parse::<f64>()
                .ok()
                .filter(|x| x.is_finite())
                .with_context(|| format!("{flag}: `{v}` is not a number"))
        };
        match flag {
            "--host" => self.host = Some(v.to_string()),
            "--port" => {
                v.parse::<u16>()
                    .ok()
                    .filter(|p| *p > 0)
                    .with_context(|| format!("--port: `{v}` is not a port (1 to 65535)"))?;
                self.port = Some(v.to_string());
            }
            "--backend" | "--endpoint-type" => {
                let api = match v {
                    "openai" | "vllm" => "completions",
                    "openai-chat" => "chat",
                    _ => bail!(
                        "{flag}: `{v}` is not taken by tpscope (openai, vllm or openai-chat; \
                         Anthropic's API is --api anthropic)"
                    ),
                };
                self.backend = Some(v.to_string());
                out.extend(["--api".to_string(), api.to_string()]);
            }
            "--served-model-name" => self.served = Some(v.to_string()),
            "--tokenizer" => out.extend(["--tokenizer".to_string(), format!("hf:{v}")]),
            "--random-range-ratio" => {
                let r = number(v)?;
                if !(0.0..1.0).contains(&r) {
                    bail!("--random-range-ratio: {v} is not in [0, 1)");
                }
                self.range_ratio = Some(r);
            }
            "--num-warmups" => {
                let n: u64 = v
                    .parse()
                    .with_context(|| format!("--num-warmups: `{v}` is not a count"))?;
                if n > 0 {
                    out.extend(["--warmup".to_string(), n.to_string()]);
                }
            }
            "--top-k" => {
                let k: i64 = v
                    .parse()
                    .with_context(|| format!("--top-k: `{v}` is not an integer"))?;
                self.body.insert("top_k".into(), k.into());
            }
            "--temperature"
            | "--top-p"
            | "--min-p"
            | "--frequency-penalty"
            | "--presence-penalty"
            | "--repetition-penalty" => {
                let key = flag.trim_start_matches("--").replace('-', "_");
                self.body.insert(key, number(v)?.into());
            }
            "--extra-body" => {
                let m: serde_json::Map<String, serde_json::Value> = serde_json::from_str(v)
                    .with_context(|| format!("--extra-body: `{v}` is not a JSON object"))?;
                self.body.extend(m);
            }
            "--percentile-metrics" => {
                let m: Vec<String> = v.split(',').map(|s| s.trim().to_string()).collect();
                if let Some(bad) = m
                    .iter()
                    .find(|m| !["ttft", "tpot", "itl", "e2el"].contains(&m.as_str()))
                {
                    bail!("--percentile-metrics: `{bad}` is not one of ttft, tpot, itl, e2el");
                }
                self.metrics = Some(m);
            }
            "--metric-percentiles" => {
                let p = v
                    .split(',')
                    .map(|s| {
                        s.trim()
                            .parse::<f64>()
                            .ok()
                            .filter(|p| (0.0..=100.0).contains(p))
                    })
                    .collect::<Option<Vec<f64>>>()
                    .with_context(|| {
                        format!(
                            "--metric-percentiles: `{v}` is not a list of percentiles in 0..=100"
                        )
                    })?;
                self.percentiles = Some(p);
            }
            "--result-dir" => self.dir = Some(PathBuf::from(v)),
            "--result-filename" => self.filename = Some(v.to_string()),
            "--label" => self.label = Some(v.to_string()),
            "--input-len" => out.extend(["--input-tokens".to_string(), v.to_string()]),
            "--output-len" => out.extend(["--output-tokens".to_string(), v.to_string()]),
            _ => unreachable!("every Take::Value flag is handled: {flag}"),
        }
        Ok(())
    }

    fn values(&mut self, flag: &str, vals: &[&str], out: &mut Vec<String>) -> anyhow::Result<()> {
        match flag {
            // vLLM's unquoted form: one goal per word.
            "--goodput" => out.extend(["--goodput".to_string(), vals.join(" ")]),
            _ => {
                for kv in vals {
                    let (k, v) = kv
                        .split_once('=')
                        .with_context(|| format!("--metadata: `{kv}` is not KEY=VALUE"))?;
                    self.metadata.push((k.trim().into(), v.trim().into()));
                    out.extend(["--label".to_string(), format!("{}={}", k.trim(), v.trim())]);
                }
            }
        }
        Ok(())
    }

    fn finish(self, mut out: Vec<String>) -> anyhow::Result<Translated> {
        let has = |out: &[String], flags: &[&str]| out.iter().any(|a| flags.contains(&split(a).0));
        if self.host.is_some() || self.port.is_some() {
            if has(&out, &["--url", "--base-url"]) {
                bail!("--host/--port and --base-url both name the server: give one");
            }
            let host = self.host.as_deref().unwrap_or("127.0.0.1");
            let host = if host.contains(':') && !host.starts_with('[') {
                format!("[{host}]")
            } else {
                host.to_string()
            };
            let port = self.port.as_deref().unwrap_or("8000");
            out.extend(["--url".to_string(), format!("http://{host}:{port}/v1")]);
        }
        if !self.body.is_empty() {
            // One --extra-body: merge a native one given before.
            let mut body = self.body;
            if let Some(at) = out.iter().position(|a| split(a).0 == "--extra-body") {
                let (_, inline) = split(&out[at]);
                let given = match inline {
                    Some(v) => v.to_string(),
                    None => out.get(at + 1).cloned().unwrap_or_default(),
                };
                let mut m: serde_json::Map<String, serde_json::Value> =
                    serde_json::from_str(&given)
                        .with_context(|| format!("--extra-body: `{given}` is not a JSON object"))?;
                m.extend(std::mem::take(&mut body));
                body = m;
                out.drain(at..(at + if inline.is_some() { 1 } else { 2 }).min(out.len()));
            }
            out.extend([
                "--extra-body".to_string(),
                serde_json::Value::Object(body).to_string(),
            ]);
        }
        let mut model_id = value_of(&out, &["--model"]);
        if let Some(served) = self.served {
            // vLLM: --model names the tokenizer and the result; requests name this.
            match out.iter().position(|a| split(a).0 == "--model") {
                Some(at) if split(&out[at]).1.is_some() => out[at] = format!("--model={served}"),
                Some(at) if at + 1 < out.len() => out[at + 1] = served.clone(),
                _ => out.extend(["--model".to_string(), served.clone()]),
            }
            model_id = model_id.or(Some(served));
        }
        if let Some(r) = self.range_ratio.filter(|r| *r > 0.0) {
            ranged(&mut out, r)?;
        }
        let result = if self.save {
            let log = match value_of(&out, &["--out"]) {
                Some(p) if p == "-" => bail!(
                    "--save-result: the result is computed from the span log, which --out - \
                     sends to standard output: give --out FILE"
                ),
                Some(p) => PathBuf::from(p),
                None => {
                    // Named now, so the result knows which log to read.
                    let p =
                        tpscope_load::spec::unique_name(tpscope_model::Timestamp::now_wall(), 0);
                    out.extend(["--out".to_string(), p.display().to_string()]);
                    p
                }
            };
            // vLLM's itls need every chunk's arrival.
            if !has(&out, &["--record-chunks"]) {
                out.push("--record-chunks".to_string());
            }
            Some(ResultSettings {
                detailed: self.detailed,
                dir: self.dir,
                filename: self.filename,
                backend: self.backend.unwrap_or_else(|| "openai".into()),
                label: self.label,
                model_id,
                metrics: self
                    .metrics
                    .unwrap_or_else(|| vec!["ttft".into(), "tpot".into(), "itl".into()]),
                percentiles: self.percentiles.unwrap_or_else(|| vec![99.0]),
                metadata: self.metadata,
                log,
            })
        } else {
            if self.detailed || self.dir.is_some() || self.filename.is_some() {
                bail!("--save-detailed, --result-dir and --result-filename need --save-result");
            }
            None
        };
        Ok(Translated {
            args: out.into_iter().map(OsString::from).collect(),
            result,
        })
    }
}

/// The value of the first of `flags` on the command line.
fn value_of(out: &[String], flags: &[&str]) -> Option<String> {
    let at = out.iter().position(|a| flags.contains(&split(a).0))?;
    match split(&out[at]).1 {
        Some(v) => Some(v.to_string()),
        None => out.get(at + 1).cloned(),
    }
}

/// vLLM's `--random-range-ratio r`: each length uniform in
/// [⌊len·(1−r)⌋, ⌈len·(1+r)⌉] (defaults 1024 in, 128 out); vLLM's random dataset
/// always ignores EOS, so the lengths hold.
fn ranged(out: &mut Vec<String>, r: f64) -> anyhow::Result<()> {
    for (flags, default) in [
        (&["--input-tokens", "--random-input-len"][..], 1024u64),
        (&["--output-tokens", "--random-output-len"][..], 128u64),
    ] {
        let at = out.iter().position(|a| flags.contains(&split(a).0));
        let given = at.and_then(|_| value_of(out, flags));
        let len: u64 = match &given {
            Some(v) => v.trim().parse().map_err(|_| {
                anyhow::anyhow!(
                    "--random-range-ratio: {} {v} is not one length to range around",
                    flags[1]
                )
            })?,
            None => default,
        };
        let lo = ((len as f64) * (1.0 - r)).floor().max(1.0) as u64;
        let hi = ((len as f64) * (1.0 + r)).ceil() as u64;
        let dist = format!("uniform:{lo}..{hi}");
        match at {
            Some(at) if split(&out[at]).1.is_some() => out[at] = format!("{}={dist}", flags[0]),
            Some(at) => out[at + 1] = dist,
            None => out.extend([flags[0].to_string(), dist]),
        }
    }
    if !out
        .iter()
        .any(|a| a == "--ignore-eos" || a == "--no-ignore-eos")
    {
        out.push("--ignore-eos".to_string());
    }
    Ok(())
}
