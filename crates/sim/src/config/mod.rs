//! The simulator's configuration: the resolved [`SimConfig`] and what it is made
//! of (presets, value grammars, faults), its validation, and the knob table that
//! fills it from flags and TOML ([`knobs`]).

mod error;
mod faults;
pub mod knobs;
mod presets;
mod sim_config;
mod validate;
mod values;

pub use error::{ConfigError, Invalid};
pub use faults::Faults;
pub use knobs::{KNOBS, Knob, KnobKind, KnobValue, SimOverrides, WrongKind};
pub use presets::{GpuSpec, ModelSpec};
pub use sim_config::{BLOCK_SIZE, SimConfig};
pub use values::{OutputLen, ParseOutputLenError, ParseSpeedError, Speed};
