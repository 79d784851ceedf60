//! `tpscope sim`: flags of the simulated inference server, layered over an optional
//! TOML file (same names), and the serve loop (until Ctrl-C) or `--explain`.

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use tpscope_sim::SimOverrides;

use crate::exit::ResultExt;
use crate::sim_flags::SimFlags;

/// Flags of `tpscope sim`. Every knob flag can also be set in `--config FILE.toml`
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

    // Every knob of the simulator (model and GPU, engine, faults), from its table.
    #[command(flatten)]
    pub knobs: SimFlags,
}

fn parse_host(s: &str) -> Result<IpAddr, String> {
    if s == "localhost" {
        return Ok(IpAddr::V4(Ipv4Addr::LOCALHOST));
    }
    s.parse()
        .map_err(|_| format!("`{s}` is not an IP address (expected e.g. 127.0.0.1 or ::1)"))
}

/// Runs `tpscope sim`.
pub fn run(args: SimArgs) -> anyhow::Result<ExitCode> {
    let file = match &args.config {
        Some(p) => SimOverrides::from_toml_file(p)?,
        None => SimOverrides::default(),
    };
    let cfg = file.merge(args.knobs.overrides).resolve()?;
    if let Some(path) = cfg.truth_log.as_deref() {
        let inputs: Vec<&std::path::Path> = args.config.as_deref().into_iter().collect();
        let t = crate::out_file::Target {
            flag: "--truth-log",
            path,
        };
        crate::out_file::check(&[t], &inputs, false)?;
    }
    let mut out = std::io::stdout().lock();
    if args.explain {
        write!(out, "{}", tpscope_sim::explain(&cfg, args.explain_context))?;
        writeln!(
            out,
            "\nThis configuration ({} on {} × {}, {} KV blocks, max {} sequences, {} tokens \
             per step, {} bytes per weight, {} per KV element):\n",
            cfg.model.label(),
            cfg.tp,
            cfg.gpu.label(),
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
        .context("starting the async runtime")
        .failure()?;
    let addr = SocketAddr::new(args.host, args.port);
    rt.block_on(async move {
        // The configuration is valid: what fails now (binding, the truth log) fails
        // while running.
        let handle = tpscope_sim::start(cfg, addr).await.failure()?;
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
            .context("waiting for Ctrl-C")
            .failure()?;
        handle.shutdown().await.failure()?;
        anyhow::Ok(())
    })?;
    Ok(ExitCode::SUCCESS)
}
