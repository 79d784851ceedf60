//! What the executor needs from an HTTP client: one attempt of one request, with
//! its times stamped. [`Sender`] is implemented for `tpscope_client::Client` (in
//! `http.rs`) and by test doubles.

use std::future::Future;

use tokio_util::sync::CancellationToken;
use tpscope_model::{AttemptOutcome, RunClock};

use crate::workload::Request;

/// Sends one attempt of a request, stamping its times on `clock`; returns promptly
/// with cause `cancelled` once `cancel` fires.
pub trait Sender: Send + Sync + 'static {
    /// One HTTP attempt.
    fn attempt(
        &self,
        request: &Request,
        clock: &RunClock,
        cancel: &CancellationToken,
    ) -> impl Future<Output = AttemptOutcome> + Send;
}
