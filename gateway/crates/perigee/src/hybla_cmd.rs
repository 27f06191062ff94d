//! `perigee hybla status|load|unload`.
use clap::{Args as ClapArgs, Subcommand};

#[derive(ClapArgs)]
pub struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(Subcommand)]
enum Action {
    /// Which implementation is active and its parameters.
    Status {
        #[arg(long)]
        json: bool,
    },
    /// Register Perigee's BPF Hybla when the kernel has none.
    Load,
    /// Remove Perigee's BPF Hybla (never the kernel's).
    Unload,
}

pub fn run(args: Args) -> i32 {
    match args.action {
        Action::Status { json } => {
            let st = perigee_hybla::status();
            if json {
                println!("{}", serde_json::to_string_pretty(&serde_json::json!({
                    "implementation": st.implementation, "loaded": st.loaded,
                    "rtt0_ms": st.rtt0_ms, "base_rtt_ms": st.base_rtt_ms,
                    "available": st.available, "problem": st.problem })).unwrap_or_default());
            } else {
                println!("{:?}", st);
            }
            0
        }
        Action::Load => match perigee_hybla::load() {
            Ok(_) => 0,
            Err(e) => {
                eprintln!("perigee hybla load: {e}");
                1
            }
        },
        Action::Unload => match perigee_hybla::unload() {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("perigee hybla unload: {e}");
                1
            }
        },
    }
}
