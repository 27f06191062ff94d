//! `perigee`: the gateway's CLI and daemon.
use clap::{Parser, Subcommand};

mod hybla_cmd;

use perigee::gateway::cli;

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
    /// The splitter daemon.
    #[command(subcommand)]
    Gateway(cli::GatewayCmd),
    /// Split flows of the running daemon.
    Flows {
        #[arg(long)]
        json: bool,
        #[arg(long, default_value = "live", value_parser = ["live", "closed", "all"])]
        state: String,
        #[command(flatten)]
        sock: cli::SocketArg,
    },
    /// Configuration of the running daemon.
    Config {
        #[command(subcommand)]
        cmd: cli::ConfigCmd,
        #[command(flatten)]
        sock: cli::SocketArg,
    },
    /// Daemon health; exits 1 when degraded or failed open, 2 when unreachable.
    Health {
        #[command(flatten)]
        sock: cli::SocketArg,
    },
    /// Daemon counters.
    Counters {
        #[command(flatten)]
        sock: cli::SocketArg,
    },
    /// This gateway's identity on the peer path: show, rotate, commit (or init, offline).
    Identity {
        #[command(subcommand)]
        cmd: cli::IdentityCmd,
        #[command(flatten)]
        sock: cli::SocketArg,
    },
    /// The peer path's state (GET /v1/peer): a hub's terminals, a terminal's pool.
    Peer {
        #[command(flatten)]
        sock: cli::SocketArg,
    },
    /// The BGP sessions and their BFD state of the FRR beside the daemon (GET /v1/routing).
    Routing {
        #[command(flatten)]
        sock: cli::SocketArg,
    },
    /// The control protocol's JSON Schema: `config` (what PUT /v1/config takes) or `reports`
    /// (what the daemon answers).
    Schema {
        #[arg(value_parser = ["config", "reports"])]
        which: String,
    },
}

fn main() {
    let cli = Cli::parse();
    let code = match cli.command {
        Command::Hybla(args) => hybla_cmd::run(args),
        Command::Gateway(cmd) => cli::gateway(cmd),
        Command::Flows { json, state, sock } => cli::flows(&sock, json, &state),
        Command::Config { cmd, sock } => cli::config_cmd(&sock, cmd),
        Command::Health { sock } => cli::health(&sock),
        Command::Counters { sock } => cli::simple(&sock, "/v1/counters"),
        Command::Routing { sock } => cli::simple(&sock, "/v1/routing"),
        Command::Identity { cmd, sock } => cli::identity_cmd(&sock, cmd),
        Command::Peer { sock } => cli::simple(&sock, "/v1/peer"),
        Command::Schema { which } => {
            let schema = match which.as_str() {
                "config" => perigee::gateway::schema::config_schema(),
                _ => perigee::gateway::schema::reports_schema(),
            };
            print!("{}", perigee::gateway::schema::render(&schema));
            0
        }
    };
    std::process::exit(code);
}
