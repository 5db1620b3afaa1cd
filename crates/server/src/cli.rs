//! The `tradeops` command line: `serve`, `worker`, `migrate`, `token create|revoke|list`, `data import`,
//! `reference import` (float and sector per symbol, through the same
//! [`crate::domain::reference`] service as `PUT /api/market/reference`, audited with actor `cli`;
//! a running service on the same database picks it up within
//! [`crate::domain::reference::RELOAD_EVERY`]).
//!
//! Token commands work on the database through the same [`TokenRegistry`] token actions and
//! repositories as the service (never its routes), are audited like the API's token actions
//! (actor `cli`), and reach a running service on the same database within its token poll
//! ([`crate::domain::tokens::TOKEN_POLL_EVERY`]), without a restart.

use crate::app::shutdown_signal;
use crate::clock::SystemClock;
use crate::config::{redact, Config};
use crate::domain::actions::{Action, TOKEN_CREATE, TOKEN_REVOKE};
use crate::domain::tokens::{validate_token_name, TokenRegistry};
use crate::domain::DomainError;
use crate::telemetry;
use anyhow::Context;
use clap::{Parser, Subcommand};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use tradeops_core::time::{format_ts, from_epoch_ms};
use tradeops_core::{Clock, Role, Settings, TradingMode};
use tradeops_store::{AuditEntry, AuditRepository, Database, SettingsRepository, TokenRepository};

#[derive(Parser, Debug)]
#[command(name = "tradeops", version, about = "Momentum day trading service and operator console backend")]
pub struct Cli {
    /// Configuration file over the embedded defaults (also TRADEOPS_CONFIG).
    #[arg(long, global = true, env = "TRADEOPS_CONFIG")]
    pub config: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the service.
    Serve,
    /// Run downloads and backtests only, beside services on the same PostgreSQL database
    /// (set `jobs.run = false` on the services to leave every job to workers).
    Worker,
    /// Apply database migrations and exit.
    Migrate,
    /// Manage API tokens.
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
    /// Historical data.
    Data {
        #[command(subcommand)]
        command: DataCommand,
    },
    /// Reference data of symbols (float, sector).
    Reference {
        #[command(subcommand)]
        command: ReferenceCommand,
    },
}

#[derive(Subcommand, Debug)]
pub enum ReferenceCommand {
    /// Import float and sector per symbol from a CSV file with the header `symbol,float,sector`
    /// (the same format as `PUT /api/market/reference`). Replaces every imported row unless
    /// `--merge`; a bad row names its line and field, and nothing is stored.
    Import {
        /// Keep the imported rows of symbols this file does not name.
        #[arg(long)]
        merge: bool,
        file: PathBuf,
    },
}

#[derive(Subcommand, Debug)]
pub enum DataCommand {
    /// Store bars from a CSV file (the same format as `POST /api/data/import`).
    Import {
        #[arg(long)]
        symbol: String,
        /// 1d or 1m.
        #[arg(long, default_value = "1d")]
        timeframe: String,
        file: PathBuf,
    },
}

#[derive(Subcommand, Debug)]
pub enum TokenCommand {
    /// Create a token and print its secret once.
    Create {
        #[arg(long)]
        name: String,
        /// viewer, operator or admin.
        #[arg(long)]
        role: String,
    },
    /// Revoke the active token named N (refused for the last active admin token).
    Revoke {
        #[arg(long)]
        name: String,
    },
    /// List every token: name, role, created, last used, revoked (never the secret).
    List,
}

pub async fn run(cli: Cli) -> anyhow::Result<()> {
    let env: BTreeMap<String, String> = std::env::vars().collect();
    let config = Config::load(cli.config.as_deref(), &env)?;
    telemetry::init(&config.log);
    match cli.command {
        Command::Serve => crate::serve::run(config).await,
        Command::Worker => {
            let shutdown = shutdown_signal()?;
            let worker = crate::worker::Worker::build(config, Arc::new(SystemClock)).await?;
            worker.run_until_stopped(shutdown).await
        }
        Command::Migrate => {
            Database::open(&config.database_url).await?;
            println!("migrations applied to {}", redact(&config.database_url));
            Ok(())
        }
        Command::Data { command: DataCommand::Import { symbol, timeframe, file } } => {
            let symbol = tradeops_core::Symbol::parse(&symbol).map_err(|e| anyhow::anyhow!("--symbol {e}"))?;
            let timeframe = tradeops_core::market::Timeframe::parse(&timeframe)
                .ok_or_else(|| anyhow::anyhow!("--timeframe must be 1d or 1m"))?;
            let body = std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?;
            let db = Database::open(&config.database_url).await?;
            let stored = crate::jobs::downloads::import_bars(&db, &symbol, timeframe, &body)
                .await
                .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
            println!("{stored} {} bars of {symbol} stored", timeframe.as_str());
            Ok(())
        }
        Command::Reference { command: ReferenceCommand::Import { merge, file } } => {
            reference_import(&config, merge, &file).await
        }
        Command::Token { command } => {
            let db = Database::open(&config.database_url).await?;
            match command {
                TokenCommand::Create { name, role } => token_create(&db, &name, &role).await,
                TokenCommand::Revoke { name } => token_revoke(&db, &name).await,
                TokenCommand::List => token_list(&db).await,
            }
        }
    }
}

async fn reference_import(config: &Config, merge: bool, file: &std::path::Path) -> anyhow::Result<()> {
    use crate::domain::reference::{parse_csv, ImportMode, ReferenceService};
    let body = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    let db = Database::open(&config.database_url).await?;
    let mode = if merge { ImportMode::Merge } else { ImportMode::Replace };
    let service = ReferenceService::new(Arc::new(db.clone()), Default::default());
    let imported = match parse_csv(&body) {
        Ok(rows) => service.import(rows, mode, SystemClock.now()).await,
        Err(e) => Err(e),
    };
    let request = serde_json::json!({"file": file.display().to_string(), "bytes": body.len(), "mode": mode});
    audit(&db, crate::domain::actions::REFERENCE_IMPORT, "reference", request, &imported).await;
    let done = imported.map_err(|e| anyhow::anyhow!("{}: {e} ({})", file.display(), e.code().as_str()))?;
    println!(
        "{} symbols imported ({}); {} symbols have imported reference data",
        done.imported,
        if merge { "merge" } else { "replace" },
        done.total
    );
    Ok(())
}

async fn token_create(db: &Database, name: &str, role: &str) -> anyhow::Result<()> {
    validate_token_name(name).map_err(|e| anyhow::anyhow!("{e}"))?;
    let role: Role = role.parse().map_err(|e: String| anyhow::anyhow!("--role {e}"))?;
    let tokens = TokenRegistry::load(Arc::new(db.clone())).await.map_err(|e| anyhow::anyhow!("{e}"))?;
    let created = tokens.create_named(name, role, "cli", SystemClock.now().timestamp_millis()).await;
    audit(db, TOKEN_CREATE, name, serde_json::json!({"name": name, "role": role}), &created).await;
    let secret = created.map_err(|e| anyhow::anyhow!("{e}"))?;
    println!("{secret}");
    eprintln!("token {name:?} ({role}) created; the secret above is shown only once");
    Ok(())
}

async fn token_revoke(db: &Database, name: &str) -> anyhow::Result<()> {
    validate_token_name(name).map_err(|e| anyhow::anyhow!("--name {e}"))?;
    let tokens = TokenRegistry::load(Arc::new(db.clone())).await.map_err(|e| anyhow::anyhow!("{e}"))?;
    let revoked = tokens.revoke_named(name, SystemClock.now().timestamp_millis()).await;
    audit(db, TOKEN_REVOKE, name, serde_json::json!({}), &revoked).await;
    revoked.map_err(|e| anyhow::anyhow!("{e} ({})", e.code().as_str()))?;
    println!("token {name:?} revoked");
    Ok(())
}

/// Prints every token as a table; times are RFC 3339 UTC, `-` when never.
async fn token_list(db: &Database) -> anyhow::Result<()> {
    let when = |ms: Option<i64>| ms.map(|ms| format_ts(&from_epoch_ms(ms))).unwrap_or_else(|| "-".into());
    let mut rows = vec![["NAME".to_string(), "ROLE".into(), "CREATED".into(), "LAST USED".into(), "REVOKED".into()]];
    for t in db.all_tokens().await? {
        rows.push([t.name, t.role, when(Some(t.created_at)), when(t.last_used_at), when(t.revoked_at)]);
    }
    let widths: Vec<usize> = (0..5).map(|c| rows.iter().map(|r| r[c].len()).max().unwrap_or(0)).collect();
    let mut out = std::io::stdout().lock();
    for row in rows {
        let cells: Vec<String> = row.iter().zip(&widths).map(|(cell, w)| format!("{cell:<w$}")).collect();
        writeln!(out, "{}", cells.join("  ").trim_end())?;
    }
    Ok(())
}

/// Writes the audit row of a token command (actor `cli`, no role: whoever runs it has the
/// database itself); a row that cannot be written is reported, not fatal.
async fn audit<T>(
    db: &Database,
    action: Action,
    target: &str,
    request: serde_json::Value,
    outcome: &Result<T, DomainError>,
) {
    let mode = match db.latest_settings().await {
        Ok(Some(v)) => serde_json::from_str(&v.settings)
            .ok()
            .and_then(|doc| Settings::from_json(&doc).ok())
            .map(|s| s.runtime.trading_mode)
            .unwrap_or_default(),
        _ => TradingMode::default(),
    };
    // The CLI runs beside the service, not its market: its rows carry the wall time (the same
    // as market time in PAPER and LIVE).
    let now = SystemClock.now().timestamp_millis();
    let entry = AuditEntry {
        ts: now,
        wall_ts: now,
        actor: "cli".into(),
        role: None,
        action: action.name.to_string(),
        target: target.to_string(),
        request: request.to_string(),
        outcome: match outcome {
            Ok(_) => "OK".to_string(),
            Err(e) => e.code().as_str().to_string(),
        },
        mode: mode.as_str().to_string(),
        request_id: format!("cli-{}", uuid::Uuid::new_v4().simple()),
    };
    if let Err(e) = db.append_audit(&entry).await {
        eprintln!("warning: could not write the audit row: {e}");
    }
}
