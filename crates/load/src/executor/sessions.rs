//! Multi-turn sessions in a run: one task per session sends its turns in order,
//! each through the same admission queue and request path as any request, each
//! turn's prompt the whole history with the replies as the server returned them,
//! pausing for the think time between a reply and the next turn. A turn that fails
//! or is cancelled ends its session.

use std::sync::Arc;
use std::time::Instant;

use rand::SeedableRng;
use rand::rngs::StdRng;
use tpscope_client::{Message, Prompt, RequestSpec};
use tpscope_tokens::mix;

use super::request::{Shared, Ticket, TurnTicket, admit_locked, start_all};
use crate::sender::Sender;
use crate::workload::Request;
use crate::workload::sessions::{SessionPlan, SessionSource, UserTurn};

/// Starts every session's task (on the run's tracker, so the run waits for them).
pub(super) fn start_sessions<S: Sender>(sh: &Arc<Shared<S>>, plan: Arc<SessionPlan>) {
    for session in 0..plan.sessions() {
        let (system, turns) = session_turns(sh, &plan, session);
        sh.tracker.spawn(session_task(
            sh.clone(),
            plan.clone(),
            session,
            system,
            turns,
        ));
    }
}

/// A session's system prompt and user turns.
fn session_turns<S: Sender>(
    sh: &Shared<S>,
    plan: &SessionPlan,
    session: u64,
) -> (Option<String>, Vec<UserTurn>) {
    match &plan.source {
        SessionSource::Conversations { items, .. } => {
            let c = &items[(session % items.len().max(1) as u64) as usize];
            (c.system.clone(), c.turns.clone())
        }
        SessionSource::Synthetic { turns, .. } => {
            let mut rng = StdRng::seed_from_u64(mix(sh.plan.seed ^ mix(session) ^ 0x7E55));
            let n = turns.sample(&mut rng).max(1);
            // Turn k of session s is request (s, k) of the single-turn workload.
            let user = (0..n)
                .map(|k| {
                    let seq = mix(session) ^ u64::from(k);
                    let r = sh.plan.workload.request(
                        seq,
                        sh.plan.seed,
                        sh.plan.prompt_salt,
                        sh.plan.tokenizer,
                        sh.plan.context,
                    );
                    UserTurn {
                        content: match r.spec.prompt {
                            Prompt::Text(t) => t,
                            Prompt::Messages(ms) => ms
                                .into_iter()
                                .map(|m| m.content)
                                .collect::<Vec<_>>()
                                .join("\n"),
                        },
                        max_tokens: r.spec.max_tokens,
                    }
                })
                .collect();
            (None, user)
        }
    }
}

async fn session_task<S: Sender>(
    sh: Arc<Shared<S>>,
    plan: Arc<SessionPlan>,
    session: u64,
    system: Option<String>,
    turns: Vec<UserTurn>,
) {
    let mut rng = StdRng::seed_from_u64(mix(sh.plan.seed ^ mix(session) ^ 0x7111));
    let mut history: Vec<Message> = system
        .map(|content| Message {
            role: "system".into(),
            content,
        })
        .into_iter()
        .collect();
    for (k, turn) in turns.into_iter().enumerate() {
        if k > 0
            && let Some(think) = plan.think_time
        {
            let pause = think.sample(&mut rng);
            tokio::select! {
                _ = tokio::time::sleep(pause) => {}
                _ = sh.stop.cancelled() => return,
            }
        }
        history.push(Message {
            role: "user".into(),
            content: turn.content,
        });
        let max_tokens = turn.max_tokens.unwrap_or_else(|| {
            // A conversation file's turn without a length: the run's output lengths.
            sh.plan
                .workload
                .request(
                    mix(session) ^ k as u64,
                    sh.plan.seed,
                    sh.plan.prompt_salt,
                    sh.plan.tokenizer,
                    sh.plan.context,
                )
                .max_tokens()
        });
        let (tx, rx) = tokio::sync::oneshot::channel();
        // Ready once the turn is built: the task's own wake-up and history copy are
        // the client's work, not a wait of the pipeline's (docs/design.md §13).
        let ticket = Ticket {
            seq: 0,
            ready: Instant::now(),
            turn: Some(Box::new(TurnTicket {
                request: Request {
                    spec: RequestSpec {
                        prompt: Prompt::Messages(history.clone()),
                        max_tokens: Some(max_tokens.max(1)),
                    },
                    input_tokens: None,
                },
                session,
                turn: k as u32 + 1,
                reply: tx,
            })),
        };
        let mut next = Vec::new();
        let now = {
            let mut st = sh.lock();
            if st.stopping || sh.stop.is_cancelled() {
                return;
            }
            let seq = st.next_seq;
            st.next_seq += 1;
            st.adm.push(Ticket { seq, ..ticket });
            let now = Instant::now();
            admit_locked(&sh, &mut st, now, &mut next);
            now
        };
        start_all(&sh, next, now);
        let Ok(reply) = rx.await else {
            return;
        };
        history.push(Message {
            role: "assistant".into(),
            content: reply,
        });
    }
}
