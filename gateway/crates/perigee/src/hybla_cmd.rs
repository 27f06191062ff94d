//! `perigee hybla status|load|unload|set`.
use clap::{Args as ClapArgs, Subcommand};
use perigee_hybla::{HyblaParams, HyblaStatus, Implementation};

#[derive(ClapArgs)]
pub struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(Subcommand)]
enum Action {
    /// Which implementation is active (kernel|bpf|none) and its parameters.
    Status {
        #[arg(long)]
        json: bool,
    },
    /// Make `hybla` available: the kernel's if present, else register Perigee's BPF one.
    Load,
    /// Remove Perigee's BPF Hybla (never the kernel's).
    Unload,
    /// Change RTT0, the base RTT and the cwnd ceiling at run time (open connections keep
    /// running).
    Set {
        /// Hybla's reference RTT, milliseconds (default 25).
        #[arg(long)]
        rtt0_ms: Option<u32>,
        /// Base RTT used for rho instead of the measured minimum; 0 = measured.
        #[arg(long)]
        base_rtt_ms: Option<u32>,
        /// Cwnd ceiling, segments (e.g. 2 x BDP / MSS); 0 = built-in 65536.
        #[arg(long)]
        cwnd_max: Option<u32>,
    },
}

pub fn run(args: Args) -> i32 {
    match args.action {
        Action::Status { json } => {
            print_status(&perigee_hybla::status(), json);
            0
        }
        Action::Load => match perigee_hybla::load() {
            Ok(st) => {
                print_status(&st, false);
                0
            }
            Err(e) => fail("load", e),
        },
        Action::Unload => match perigee_hybla::unload() {
            Ok(()) => 0,
            Err(e) => fail("unload", e),
        },
        Action::Set {
            rtt0_ms,
            base_rtt_ms,
            cwnd_max,
        } => {
            let cur = perigee_hybla::status();
            let params = HyblaParams {
                rtt0_ms: rtt0_ms.unwrap_or(cur.rtt0_ms),
                base_rtt_ms: base_rtt_ms.unwrap_or(cur.base_rtt_ms),
            };
            let result = if rtt0_ms.is_some() || base_rtt_ms.is_some() || cwnd_max.is_none() {
                perigee_hybla::set_params(params)
            } else {
                Ok(())
            }
            .and_then(|()| cwnd_max.map_or(Ok(()), perigee_hybla::set_cwnd_ceiling));
            match result {
                Ok(()) => {
                    print_status(&perigee_hybla::status(), false);
                    0
                }
                Err(e) => fail("set", e),
            }
        }
    }
}

fn fail(what: &str, e: perigee_hybla::HyblaError) -> i32 {
    eprintln!("perigee hybla {what}: {e}");
    1
}

fn print_status(st: &HyblaStatus, json: bool) {
    if json {
        println!("{}", serde_json::to_string_pretty(st).unwrap_or_default());
        return;
    }
    let which = match st.implementation {
        Implementation::Kernel => "kernel (tcp_hybla module)",
        Implementation::Bpf if st.owned => "bpf (Perigee struct_ops)",
        Implementation::Bpf => "bpf (not Perigee's)",
        Implementation::None => "none",
    };
    println!("implementation: {which}");
    println!("loaded:         {}", st.loaded);
    println!("rtt0_ms:        {}", st.rtt0_ms);
    println!(
        "base_rtt_ms:    {}{}",
        st.base_rtt_ms,
        if st.base_rtt_ms == 0 {
            " (measured min RTT)"
        } else {
            ""
        }
    );
    println!(
        "cwnd_max:       {}{}",
        st.cwnd_max,
        if st.cwnd_max == 0 {
            " (built-in 65536)"
        } else {
            " segments"
        }
    );
    println!("available:      {}", st.available.join(" "));
    if let Some(p) = &st.problem {
        println!("problem:        {p}");
    }
}
