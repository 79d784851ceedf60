//! The LiteLLM proxy configuration of the relay benchmark, pure: LiteLLM's proxy
//! server as the pass-through gateway Python pipelines put in front of their
//! servers, its one model an OpenAI-compatible provider at the benchmark's
//! upstream, with every logging and callback hook off.

use std::net::SocketAddr;

/// The model name the benchmark's client asks for (its request body's `model`).
pub const MODEL: &str = "bench-model";

/// config.yaml for `litellm --config`: `MODEL` routed to `upstream` as an
/// OpenAI-compatible server (`openai/` provider, `api_base` with the `/v1` the
/// OpenAI SDK expects), no callbacks, no message logging, no telemetry.
///
/// Why each setting: the `openai/` prefix makes LiteLLM call the upstream
/// through its OpenAI client as for any self-hosted vLLM or SGLang server; the
/// callbacks lists are empty and `turn_off_message_logging` keeps request and
/// response bodies out of any logger, so what is measured is the relay itself
/// (parse each upstream chunk, rebuild it, serialise it to the client);
/// without `master_key` and `database_url` there is no authentication and no
/// spend tracking. The process runs one worker (`--num_workers 1`, on the
/// command line, as nginx's and tpscope's are measured by their processes).
pub fn litellm_conf(upstream: SocketAddr) -> String {
    format!(
        "model_list:
  - model_name: {MODEL}
    litellm_params:
      model: openai/{MODEL}
      api_base: http://{upstream}/v1
      api_key: bench
litellm_settings:
  telemetry: false
  turn_off_message_logging: true
  set_verbose: false
  callbacks: []
  success_callback: []
  failure_callback: []
  service_callback: []
"
    )
}

/// The environment LiteLLM runs with: its bundled model price map (it would
/// fetch one from the network at start), errors only in its log.
pub const ENV: [(&str, &str); 3] = [
    ("LITELLM_LOCAL_MODEL_COST_MAP", "True"),
    ("LITELLM_LOG", "ERROR"),
    ("LITELLM_TELEMETRY", "False"),
];
