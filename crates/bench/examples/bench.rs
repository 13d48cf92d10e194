//! Runs `lockmeter bench` without the main binary: `cargo run --release -p lockmeter-bench
//! --example bench -- [args]` takes the same arguments as `lockmeter bench`.

use clap::Parser;
use lockmeter_bench::{BenchArgs, run};

#[derive(Parser)]
#[command(name = "bench")]
struct Cli {
    #[command(flatten)]
    args: BenchArgs,
}

fn main() -> anyhow::Result<()> {
    run(Cli::parse().args)
}
