//! `tradeops`: parse the command line and run it.

use clap::Parser;
use tradeops_server::cli::{run, Cli};

#[tokio::main]
async fn main() {
    if let Err(e) = run(Cli::parse()).await {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}
