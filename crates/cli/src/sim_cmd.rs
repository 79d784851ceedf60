//! `tpscope sim`: flags of the simulated inference server, layered over an optional
//! TOML file (same names), and the serve loop (until Ctrl-C) or `--explain`.

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use tpscope_model::parse_duration;
use tpscope_sim::SimOverrides;

/// Flags of `tpscope sim`. Every engine flag can also be set in `--config FILE.toml`
/// under the same name with `_` for `-` (flags win over the file).
#[derive(clap::Args, Debug)]
pub struct SimArgs {
    /// Address to bind (`localhost` means 127.0.0.1).
    #[arg(long, default_value = "127.0.0.1", value_parser = parse_host)]
    pub host: IpAddr,
    /// Port to listen on; 0 picks a free port (the address is printed).
    #[arg(long, default_value_t = 8000)]
    pub port: u16,
    /// TOML file of settings (keys as the flags, e.g. `max_num_seqs = 64`).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Print the roofline table (step time, per-sequence and system TPS at batch
    /// 1, 8, 32, 128, 256 for every preset) and the resolved configuration, then exit.
    #[arg(long)]
    pub explain: bool,
    /// Context tokens per sequence assumed by `--explain`.
    #[arg(long, default_value_t = 1024, value_name = "TOKENS")]
    pub explain_context: u64,

    /// Model preset: llama-3.1-8b, llama-3.1-70b.
    #[arg(long, help_heading = "Model and GPU")]
    pub model: Option<String>,
    /// GPU preset: h100, h200, a100-80gb, l40s.
    #[arg(long, help_heading = "Model and GPU")]
    pub gpu: Option<String>,
    /// Tensor-parallel degree (default: the smallest power of two whose KV cache holds
    /// one max-length sequence).
    #[arg(long, help_heading = "Model and GPU")]
    pub tp: Option<u32>,
    /// Model name served (default `sim-<model>`, e.g. sim-llama-3.1-8b).
    #[arg(long, help_heading = "Model and GPU")]
    pub served_model_name: Option<String>,
    /// Parameters, in billions.
    #[arg(long, help_heading = "Model and GPU")]
    pub params_b: Option<f64>,
    /// Transformer layers.
    #[arg(long, help_heading = "Model and GPU")]
    pub layers: Option<u32>,
    /// Key/value heads.
    #[arg(long, help_heading = "Model and GPU")]
    pub kv_heads: Option<u32>,
    /// Attention head dimension.
    #[arg(long, help_heading = "Model and GPU")]
    pub head_dim: Option<u32>,
    /// Bytes per weight (2 = BF16, 1 = FP8).
    #[arg(long, help_heading = "Model and GPU")]
    pub weight_bytes_per_param: Option<f64>,
    /// Bytes per KV-cache element.
    #[arg(long, help_heading = "Model and GPU")]
    pub kv_bytes_per_elem: Option<f64>,
    /// Longest sequence (prompt + output).
    #[arg(long, help_heading = "Model and GPU")]
    pub max_model_len: Option<u32>,
    /// GPU memory in GiB.
    #[arg(long, help_heading = "Model and GPU")]
    pub gpu_memory_gib: Option<f64>,
    /// Peak HBM bandwidth in GB/s.
    #[arg(long, help_heading = "Model and GPU")]
    pub hbm_gb_per_s: Option<f64>,
    /// Peak dense BF16 TFLOP/s.
    #[arg(long, help_heading = "Model and GPU")]
    pub tflops: Option<f64>,

    /// Fraction of GPU memory for weights plus KV cache.
    #[arg(long, help_heading = "Engine")]
    pub gpu_memory_utilization: Option<f64>,
    /// KV-cache blocks of 16 tokens (overrides the figure derived from memory).
    #[arg(long, help_heading = "Engine")]
    pub num_kv_blocks: Option<u64>,
    /// Most sequences in the running batch.
    #[arg(long, help_heading = "Engine")]
    pub max_num_seqs: Option<u32>,
    /// Token budget per step (chunked prefill).
    #[arg(long, help_heading = "Engine")]
    pub max_num_batched_tokens: Option<u32>,
    /// Fraction of peak bandwidth achieved.
    #[arg(long, help_heading = "Engine")]
    pub mem_efficiency: Option<f64>,
    /// Fraction of peak FLOP/s achieved.
    #[arg(long, help_heading = "Engine")]
    pub compute_efficiency: Option<f64>,
    /// Fixed time per step (e.g. 500us).
    #[arg(long, value_parser = parse_duration, help_heading = "Engine")]
    pub step_overhead: Option<Duration>,
    /// realtime, max (no sleeping), or a factor such as 10.
    #[arg(long, help_heading = "Engine")]
    pub speed: Option<String>,
    /// Seed of output lengths, text and faults.
    #[arg(long, help_heading = "Engine")]
    pub seed: Option<u64>,
    /// Tokenizer: o200k_base, cl100k_base.
    #[arg(long, help_heading = "Engine")]
    pub tokenizer: Option<String>,
    /// Output lengths when not ignore_eos: fixed:N, uniform:MIN,MAX,
    /// lognormal:MEDIAN,SIGMA, exponential:MEAN (capped by max_tokens).
    #[arg(long, help_heading = "Engine")]
    pub output_len: Option<String>,
    /// Write one JSON line per request (received, first and last token, tokens, fault).
    #[arg(long, value_name = "FILE", help_heading = "Engine")]
    pub truth_log: Option<PathBuf>,

    /// Probability of a 429 with Retry-After.
    #[arg(long, help_heading = "Faults")]
    pub fault_429: Option<f64>,
    /// Retry-After of a 429 (e.g. 1s).
    #[arg(long, value_parser = parse_duration, help_heading = "Faults")]
    pub retry_after: Option<Duration>,
    /// Probability of a 500.
    #[arg(long, help_heading = "Faults")]
    pub fault_500: Option<f64>,
    /// Probability of a 503.
    #[arg(long, help_heading = "Faults")]
    pub fault_503: Option<f64>,
    /// Probability that a response is cut (connection closed, no [DONE]).
    #[arg(long, help_heading = "Faults")]
    pub fault_cut: Option<f64>,
    /// Tokens delivered before a cut.
    #[arg(long, help_heading = "Faults")]
    pub cut_after: Option<u32>,
    /// Probability of a mid-stream stall.
    #[arg(long, help_heading = "Faults")]
    pub fault_stall: Option<f64>,
    /// Length of a stall (e.g. 2s).
    #[arg(long, value_parser = parse_duration, help_heading = "Faults")]
    pub stall_for: Option<Duration>,
    /// Tokens delivered before a stall.
    #[arg(long, help_heading = "Faults")]
    pub stall_after: Option<u32>,
    /// Probability of one malformed (non-JSON) data: event.
    #[arg(long, help_heading = "Faults")]
    pub fault_malformed: Option<f64>,
    /// Tokens delivered before the malformed event.
    #[arg(long, help_heading = "Faults")]
    pub malformed_after: Option<u32>,
    /// Probability of a slow first token.
    #[arg(long, help_heading = "Faults")]
    pub fault_slow_first_token: Option<f64>,
    /// Extra wait before a slow first token (e.g. 2s).
    #[arg(long, value_parser = parse_duration, help_heading = "Faults")]
    pub slow_first_token_delay: Option<Duration>,
    /// Send `Connection: close` on every response (connection churn).
    #[arg(long, help_heading = "Faults")]
    pub connection_close: bool,
}

fn parse_host(s: &str) -> Result<IpAddr, String> {
    if s == "localhost" {
        return Ok(IpAddr::V4(Ipv4Addr::LOCALHOST));
    }
    s.parse()
        .map_err(|_| format!("`{s}` is not an IP address (expected e.g. 127.0.0.1 or ::1)"))
}

impl SimArgs {
    fn overrides(&self) -> SimOverrides {
        SimOverrides {
            model: self.model.clone(),
            gpu: self.gpu.clone(),
            tp: self.tp,
            served_model_name: self.served_model_name.clone(),
            params_b: self.params_b,
            layers: self.layers,
            kv_heads: self.kv_heads,
            head_dim: self.head_dim,
            weight_bytes_per_param: self.weight_bytes_per_param,
            kv_bytes_per_elem: self.kv_bytes_per_elem,
            max_model_len: self.max_model_len,
            gpu_memory_gib: self.gpu_memory_gib,
            hbm_gb_per_s: self.hbm_gb_per_s,
            tflops: self.tflops,
            gpu_memory_utilization: self.gpu_memory_utilization,
            num_kv_blocks: self.num_kv_blocks,
            max_num_seqs: self.max_num_seqs,
            max_num_batched_tokens: self.max_num_batched_tokens,
            mem_efficiency: self.mem_efficiency,
            compute_efficiency: self.compute_efficiency,
            step_overhead: self.step_overhead,
            speed: self.speed.clone(),
            seed: self.seed,
            tokenizer: self.tokenizer.clone(),
            output_len: self.output_len.clone(),
            connection_close: self.connection_close.then_some(true),
            truth_log: self.truth_log.clone(),
            fault_429: self.fault_429,
            retry_after: self.retry_after,
            fault_500: self.fault_500,
            fault_503: self.fault_503,
            fault_cut: self.fault_cut,
            cut_after: self.cut_after,
            fault_stall: self.fault_stall,
            stall_for: self.stall_for,
            stall_after: self.stall_after,
            fault_malformed: self.fault_malformed,
            malformed_after: self.malformed_after,
            fault_slow_first_token: self.fault_slow_first_token,
            slow_first_token_delay: self.slow_first_token_delay,
        }
    }
}

/// Runs `tpscope sim`.
pub fn run(args: SimArgs) -> anyhow::Result<ExitCode> {
    let file = match &args.config {
        Some(p) => SimOverrides::from_toml_file(p)?,
        None => SimOverrides::default(),
    };
    let cfg = file.merge(args.overrides()).resolve()?;
    let mut out = std::io::stdout().lock();
    if args.explain {
        write!(out, "{}", tpscope_sim::explain(&cfg, args.explain_context))?;
        writeln!(
            out,
            "\nThis configuration ({} on {} × {}, {} KV blocks, max {} sequences, {} tokens \
             per step, {} bytes per weight, {} per KV element):\n",
            cfg.model.name,
            cfg.tp,
            cfg.gpu.name,
            cfg.kv_blocks(),
            cfg.max_num_seqs,
            cfg.max_num_batched_tokens,
            cfg.model.weight_bytes_per_param,
            cfg.model.kv_bytes_per_elem,
        )?;
        write!(
            out,
            "{}",
            tpscope_sim::explain_config(&cfg, args.explain_context)
        )?;
        out.flush()?;
        return Ok(ExitCode::SUCCESS);
    }
    drop(out);
    // Each stream is a socket: make room for thousands.
    let _ = tpscope_sim::raise_nofile_limit();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let addr = SocketAddr::new(args.host, args.port);
    rt.block_on(async move {
        let handle = tpscope_sim::start(cfg, addr).await?;
        {
            let mut out = std::io::stdout().lock();
            writeln!(
                out,
                "tpscope sim listening on {} (model {})",
                handle.base_url(),
                handle.model_name()
            )?;
            out.flush()?;
        }
        tokio::signal::ctrl_c()
            .await
            .context("waiting for Ctrl-C")?;
        handle.shutdown().await?;
        anyhow::Ok(())
    })?;
    Ok(ExitCode::SUCCESS)
}
