//! Structured logs: human-readable (`pretty`) or one JSON object per line (`json`).

use crate::config::{LogConfig, LogFormat};
use tracing_subscriber::EnvFilter;

/// Installs the global subscriber; a second call (tests) is a no-op.
pub fn init(config: &LogConfig) {
    // The filter was validated when the configuration was loaded.
    let filter = EnvFilter::try_new(&config.filter).unwrap_or_else(|_| EnvFilter::new("info"));
    // Logs go to stderr; stdout carries only the start-up lines meant for people.
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_target(false).with_writer(std::io::stderr);
    let _ = match config.format {
        LogFormat::Pretty => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).with_current_span(true).try_init(),
    };
}
