//! `tradeops`: parse the command line and run it.

use clap::Parser;

/// mimalloc: measurably cheaper than glibc malloc for the many small per-request allocations
/// (docs/PERFORMANCE.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
use tradeops_server::cli::{run, Cli};

#[tokio::main]
async fn main() {
    if let Err(e) = run(Cli::parse()).await {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}
