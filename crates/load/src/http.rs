//! The executor's [`Sender`] for the real HTTP client (`tpscope_client::Client`):
//! its attempt outcome is the model's one [`AttemptOutcome`], passed on whole.

use tokio_util::sync::CancellationToken;
use tpscope_client::Client;
use tpscope_model::{AttemptOutcome, RunClock};

use crate::sender::Sender;
use crate::workload::Request;

impl Sender for Client {
    async fn attempt(
        &self,
        request: &Request,
        clock: &RunClock,
        cancel: &CancellationToken,
    ) -> AttemptOutcome {
        Client::attempt(self, &request.spec, clock, cancel).await
    }
}
