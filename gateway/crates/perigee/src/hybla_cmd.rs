//! `perigee hybla status|load|unload|set|unset|prune|ceiling`.
use clap::{Args as ClapArgs, Subcommand};
use perigee_hybla::{HyblaParams, HyblaStatus, Implementation, PruneReport};

#[derive(ClapArgs)]
pub struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(Subcommand)]
enum Action {
    /// Which implementation is active (kernel|bpf|none), its host-wide parameters and the
    /// per-network-namespace entries.
    Status {
        #[arg(long)]
        json: bool,
    },
    /// Make `hybla` available (the kernel's if present, else register Perigee's BPF one) and
    /// `hybla_ld` next to it (Perigee's BPF; a stale or older registration of ours is replaced).
    Load,
    /// Remove Perigee's BPF `hybla` and `hybla_ld` (never the kernel's).
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
        /// Set this network namespace's own entry instead of the host-wide one (omitted
        /// values come from its current entry, else from the host-wide one).
        #[arg(long)]
        netns: bool,
    },
    /// Remove a namespace's own entry: its sockets go back to the host-wide parameters.
    Unset {
        /// The namespace's cookie (from `status`), e.g. of a namespace that is gone;
        /// default: this namespace.
        #[arg(long)]
        cookie: Option<u64>,
    },
    /// Remove the entries of namespaces that no longer exist (gateways killed without a clean
    /// stop); removes nothing when some live namespace cannot be identified (needs root).
    Prune {
        #[arg(long)]
        json: bool,
    },
    /// Print the cwnd ceiling for a link, segments (`perigee_hybla::cwnd_ceiling_for_link`: the
    /// one implementation the lab and tools ask instead of restating it).
    Ceiling {
        #[arg(long)]
        rate_bps: u64,
        #[arg(long)]
        base_rtt_ms: u32,
        #[arg(long, default_value_t = 0)]
        alloc_delay_ms: u32,
        #[arg(long, default_value_t = 1448)]
        mss: u32,
    },
}

pub fn run(args: Args) -> i32 {
    match args.action {
        Action::Ceiling {
            rate_bps,
            base_rtt_ms,
            alloc_delay_ms,
            mss,
        } => {
            let c =
                perigee_hybla::cwnd_ceiling_for_link(rate_bps, base_rtt_ms, alloc_delay_ms, mss);
            println!("{c}");
            0
        }
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
            netns: true,
        } => {
            let cur = perigee_hybla::status();
            let (p, c) = cur
                .own_netns()
                .map(|e| (e.params(), e.cwnd_max))
                .unwrap_or((
                    HyblaParams {
                        rtt0_ms: cur.rtt0_ms,
                        base_rtt_ms: cur.base_rtt_ms,
                    },
                    cur.cwnd_max,
                ));
            let params = HyblaParams {
                rtt0_ms: rtt0_ms.unwrap_or(p.rtt0_ms),
                base_rtt_ms: base_rtt_ms.unwrap_or(p.base_rtt_ms),
            };
            match perigee_hybla::set_netns_params(params, cwnd_max.unwrap_or(c)) {
                Ok(_) => {
                    print_status(&perigee_hybla::status(), false);
                    0
                }
                Err(e) => fail("set", e),
            }
        }
        Action::Unset { cookie } => match perigee_hybla::unset_netns_params(cookie) {
            Ok(removed) => {
                if !removed {
                    eprintln!("perigee hybla unset: no per-namespace entry to remove");
                }
                0
            }
            Err(e) => fail("unset", e),
        },
        Action::Prune { json } => match perigee_hybla::prune_stale_netns() {
            Ok(report) => {
                print_prune(&report, json);
                0
            }
            Err(e) => fail("prune", e),
        },
        Action::Set {
            rtt0_ms,
            base_rtt_ms,
            cwnd_max,
            netns: false,
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

fn print_prune(r: &PruneReport, json: bool) {
    if json {
        println!("{}", serde_json::to_string_pretty(r).unwrap_or_default());
        return;
    }
    let list = |cookies: &[u64]| {
        cookies
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(" ")
    };
    if r.removed.is_empty() {
        println!("removed:        none");
    } else {
        println!(
            "removed:        {} ({} stale: namespaces that no longer exist)",
            list(&r.removed),
            r.removed.len()
        );
    }
    println!("kept:           {} of live namespaces", r.kept.len());
    if !r.kept.is_empty() {
        println!("                {}", list(&r.kept));
    }
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
    print_netns(st);
    let ld = &st.ld;
    println!(
        "hybla_ld:       {}{}",
        ld.registration,
        ld.version
            .map(|v| format!(
                " (BPF version {v}, this build {})",
                perigee_hybla::BPF_VERSION
            ))
            .unwrap_or_default()
    );
    println!("available:      {}", st.available.join(" "));
    if let Some(p) = &st.problem {
        println!("problem:        {p}");
    }
    if let Some(p) = &ld.problem {
        println!("hybla_ld:       {p}");
    }
}

/// The per-namespace entries, the caller's marked; namespaces without one use the above.
fn print_netns(st: &HyblaStatus) {
    if st.implementation != Implementation::Bpf || !st.owned {
        return;
    }
    if st.netns.is_empty() {
        println!("netns entries:  none (every namespace uses the host-wide values above)");
        return;
    }
    println!(
        "netns entries:  {} of {} (namespaces without one use the host-wide values above)",
        st.netns.len(),
        perigee_hybla::NETNS_MAX
    );
    println!("  cookie                rtt0_ms  base_rtt_ms  cwnd_max");
    for e in &st.netns {
        let mark = if Some(e.cookie) == st.netns_cookie {
            "  (this namespace)"
        } else {
            ""
        };
        println!(
            "  {:<20}  {:>7}  {:>11}  {:>8}{mark}",
            e.cookie, e.rtt0_ms, e.base_rtt_ms, e.cwnd_max
        );
    }
}
