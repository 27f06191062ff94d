//! `perigee`: the gateway's CLI and daemon.
use clap::{Parser, Subcommand};

mod hybla_cmd;

#[derive(Parser)]
#[command(name = "perigee", version, about = "Perigee satellite gateway")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// TCP Hybla: status, load, unload.
    Hybla(hybla_cmd::Args),
}

fn main() {
    let cli = Cli::parse();
    let code = match cli.command {
        Command::Hybla(args) => hybla_cmd::run(args),
    };
    std::process::exit(code);
}
