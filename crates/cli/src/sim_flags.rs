//! The simulator's knobs as flags, built from its knob table (`tpscope_sim::KNOBS`):
//! `tpscope sim` has them as `--max-num-seqs`; a command that starts the simulator
//! can have them under a prefix (`--sim-max-num-seqs`) with [`FlagPrefix`].

use std::marker::PhantomData;
use std::path::PathBuf;

use clap::builder::ValueParser;
use clap::error::ErrorKind;
use clap::{Arg, ArgAction, ArgMatches, Command, FromArgMatches, value_parser};
use tpscope_sim::{KNOBS, Knob, KnobKind, KnobValue, SimOverrides};

/// How a set of simulator flags is named and grouped.
pub trait FlagPrefix {
    /// Put before each flag's name (`""`, or `"sim-"`); its id gets it with `_`.
    const PREFIX: &'static str;
    /// One help section for all of them instead of each knob's own.
    const HEADING: Option<&'static str> = None;
    /// Whether the knob of this key is a flag here (default: every knob).
    fn includes(_key: &str) -> bool {
        true
    }
}

/// No prefix, each knob under its own heading (`tpscope sim`).
#[derive(Debug)]
pub struct Plain;

impl FlagPrefix for Plain {
    const PREFIX: &'static str = "";
}

/// Every knob of the simulator as a flag, parsed into overrides (unset when not
/// given, so they layer over a config file).
#[derive(Debug)]
pub struct SimFlags<P = Plain> {
    /// The knobs given.
    pub overrides: SimOverrides,
    prefix: PhantomData<P>,
}

/// The clap id of a knob's flag: the key, prefixed.
fn id(knob: &Knob, prefix: &str) -> String {
    format!("{}{}", prefix.replace('-', "_"), knob.key)
}

/// The flag of one knob, as clap's derive would make it of an `Option<T>` field
/// (or a `bool` for a switch) with the knob's doc comment.
fn arg(knob: &Knob, prefix: &str, heading: Option<&'static str>) -> Arg {
    let a = Arg::new(id(knob, prefix))
        .long(format!("{prefix}{}", knob.flag()))
        .help(knob.help())
        .help_heading(heading.unwrap_or(knob.heading));
    let parser: ValueParser = match knob.kind {
        KnobKind::Switch => return a.action(ArgAction::SetTrue),
        KnobKind::U32 => value_parser!(u32).into(),
        KnobKind::U64 => value_parser!(u64).into(),
        KnobKind::F64 => value_parser!(f64).into(),
        KnobKind::Text => value_parser!(String),
        KnobKind::Path => value_parser!(PathBuf),
        KnobKind::Duration => ValueParser::new(tpscope_model::parse_duration),
    };
    let value_name = knob
        .value_name
        .map_or_else(|| knob.key.to_uppercase(), str::to_string);
    a.action(ArgAction::Set)
        .value_name(value_name)
        .value_parser(parser)
}

/// The knobs given on the command line.
fn overrides<P: FlagPrefix>(m: &ArgMatches) -> Result<SimOverrides, clap::Error> {
    let mut o = SimOverrides::default();
    for knob in KNOBS.iter().filter(|k| P::includes(k.key)) {
        let id = id(knob, P::PREFIX);
        let value = match knob.kind {
            KnobKind::U32 => m.get_one(&id).copied().map(KnobValue::U32),
            KnobKind::U64 => m.get_one(&id).copied().map(KnobValue::U64),
            KnobKind::F64 => m.get_one(&id).copied().map(KnobValue::F64),
            KnobKind::Text => m.get_one(&id).cloned().map(KnobValue::Text),
            KnobKind::Path => m.get_one(&id).cloned().map(KnobValue::Path),
            KnobKind::Duration => m.get_one(&id).copied().map(KnobValue::Duration),
            KnobKind::Switch => m.get_flag(&id).then_some(KnobValue::Switch(true)),
        };
        if let Some(v) = value {
            knob.set(&mut o, v)
                .map_err(|e| clap::Error::raw(ErrorKind::InvalidValue, e))?;
        }
    }
    Ok(o)
}

impl<P: FlagPrefix> clap::Args for SimFlags<P> {
    fn augment_args(cmd: Command) -> Command {
        KNOBS
            .iter()
            .filter(|k| P::includes(k.key))
            .fold(cmd, |cmd, k| cmd.arg(arg(k, P::PREFIX, P::HEADING)))
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

impl<P: FlagPrefix> FromArgMatches for SimFlags<P> {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        Ok(SimFlags {
            overrides: overrides::<P>(m)?,
            prefix: PhantomData,
        })
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        let given = overrides::<P>(m)?;
        self.overrides = std::mem::take(&mut self.overrides).merge(given);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use clap::Args;

    use super::*;

    /// As `tpscope bench` would have them.
    #[derive(Debug)]
    struct Bench;

    impl FlagPrefix for Bench {
        const PREFIX: &'static str = "sim-";
        const HEADING: Option<&'static str> = Some("Built-in simulator");
        fn includes(key: &str) -> bool {
            [
                "model",
                "gpu",
                "speed",
                "truth_log",
                "max_num_seqs",
                "connection_close",
            ]
            .contains(&key)
        }
    }

    fn command<P: FlagPrefix>() -> Command {
        SimFlags::<P>::augment_args(Command::new("t"))
    }

    fn parse<P: FlagPrefix>(args: &[&str]) -> Result<SimOverrides, clap::Error> {
        let m = command::<P>()
            .try_get_matches_from(std::iter::once("t").chain(args.iter().copied()))?;
        Ok(SimFlags::<P>::from_arg_matches(&m)?.overrides)
    }

    #[test]
    fn knobs_parse_by_their_kind_and_unset_ones_stay_unset() {
        command::<Plain>().debug_assert();
        let o = parse::<Plain>(&[
            "--max-num-seqs",
            "64",
            "--num-kv-blocks",
            "9",
            "--fault-429",
            "0.1",
            "--speed",
            "max",
            "--truth-log",
            "t.jsonl",
            "--step-overhead",
            "1h",
            "--connection-close",
        ])
        .unwrap();
        let want = SimOverrides {
            max_num_seqs: Some(64),
            num_kv_blocks: Some(9),
            fault_429: Some(0.1),
            speed: Some("max".into()),
            truth_log: Some("t.jsonl".into()),
            step_overhead: Some(Duration::from_secs(3600)),
            connection_close: Some(true),
            ..SimOverrides::default()
        };
        assert_eq!(o, want);
        assert_eq!(parse::<Plain>(&[]).unwrap(), SimOverrides::default());
        let e = parse::<Plain>(&["--max-num-seqs", "abc"]).unwrap_err();
        assert!(
            e.to_string()
                .contains("invalid value 'abc' for '--max-num-seqs <MAX_NUM_SEQS>'"),
            "{e}"
        );
    }

    #[test]
    fn a_prefix_renames_every_flag_and_a_heading_groups_them() {
        command::<Bench>().debug_assert();
        let o = parse::<Bench>(&["--sim-max-num-seqs", "8", "--sim-connection-close"]).unwrap();
        assert_eq!((o.max_num_seqs, o.connection_close), (Some(8), Some(true)));
        assert!(parse::<Bench>(&["--max-num-seqs", "8"]).is_err());
        let help = command::<Bench>().render_help().to_string();
        assert!(help.contains("Built-in simulator:"), "{help}");
        assert!(help.contains("--sim-truth-log <FILE>"), "{help}");
        assert!(!help.contains("Engine:"), "{help}");
        assert!(!help.contains("--sim-tp"), "{help}");
    }
}
