//! tpscope's load engine: workloads, pure arrival schedules, retries, the validated
//! spec of a benchmark, and the one executor every mode of `tpscope bench` runs on.
//! What it records goes through `tpscope_record` (admission, sampler, span
//! assembly, the writer thread).
#![warn(missing_docs)]

mod azure;
pub mod bench;
pub mod dist;
pub mod executor;
pub mod http;
pub mod ramp;
pub mod retry;
pub mod schedule;
pub mod sender;
pub mod spec;
pub mod workload;

pub use dist::{Column, LengthDist};
pub use executor::{Control, RunPlan, RunSummary, execute, execute_in};
pub use retry::RetryPolicy;
pub use schedule::{Arrival, Schedule};
pub use sender::Sender;
pub use spec::{BenchSpec, Flags, Level, SpecError};
pub use workload::{Message, Prompt, Request, Workload};
