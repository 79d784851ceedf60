//! The simulator library's error, [`SimError`]: a configuration that cannot be
//! used, or a failure while starting, serving or stopping.

use std::net::SocketAddr;

use crate::config::ConfigError;

/// Errors of the simulator library.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The configuration cannot be used (the messages name the flag or the file).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Binding the listening socket failed.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
    /// Another I/O failure (truth log, threads).
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// Waiting for a blocking task of the engine failed.
    #[error("simulator engine: {what}: {error}")]
    Join {
        /// What was being waited for.
        what: &'static str,
        /// The task's failure.
        error: tokio::task::JoinError,
    },
    /// A thread of the simulator panicked.
    #[error("simulator engine: the {thread} thread panicked")]
    Panicked {
        /// Which thread (`engine`, `truth-log`).
        thread: &'static str,
    },
}
