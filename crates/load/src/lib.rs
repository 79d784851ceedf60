//! tpscope's load engine: workloads, pure arrival schedules, the admission
//! controller (cap and FIFO queue, work-conserving or waves), retries, the sampler,
//! the recorder, and the one executor every mode of `tpscope bench` runs on.

pub mod admission;
pub mod assemble;
pub mod dist;
pub mod executor;
pub mod http;
pub mod live;
pub mod recorder;
pub mod retry;
pub mod sampler;
pub mod schedule;
pub mod sender;
pub mod sweep;
pub mod workload;

pub use admission::{Admission, Dispatch};
pub use dist::{Column, LengthDist};
pub use executor::{Control, RunPlan, RunSummary, execute};
pub use live::{LiveSnapshot, LiveStats};
pub use recorder::{Recorder, RecorderTx, RunCounts};
pub use retry::RetryPolicy;
pub use schedule::{Arrival, Schedule};
pub use sender::{Outcome, Sender, Usage};
pub use workload::{Message, Prompt, Request, Workload};
