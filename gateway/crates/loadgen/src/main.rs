//! perigee-loadgen: connection-rate load for the benches (see bench/tools/gwload.py).
//!
//! - `echo --bind A --port P --threads N`: echo server; prints LISTENING once bound, then serves
//!   until SIGTERM/SIGINT.
//! - `rate --connect A --port P --threads N --concurrency C --duration S --max-conns M`: prints one
//!   JSON line: completed (in the window), errors by kind, rate_per_s, latency p50/p99 in µs.
mod echo;
mod rate;
mod stats;
mod sys;

use clap::{Args, Parser, Subcommand};
use perigee_netsys::signals::TermSignals;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

#[derive(Parser)]
#[command(
    name = "perigee-loadgen",
    about = "Connection-rate load generator and echo server"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Echo server on SO_REUSEPORT listeners, one per thread.
    Echo {
        #[arg(long, default_value = "0.0.0.0")]
        bind: IpAddr,
        #[arg(long)]
        port: u16,
        #[arg(long, default_value_t = 2)]
        threads: usize,
    },
    /// connect → 1-byte echo → close, as many as the threads × concurrency in flight allow.
    Rate(RateArgs),
}

#[derive(Args)]
struct RateArgs {
    #[arg(long)]
    connect: IpAddr,
    #[arg(long)]
    port: u16,
    #[arg(long, default_value_t = 2)]
    threads: usize,
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    #[arg(long, default_value_t = 5.0)]
    duration: f64,
    /// Cap over all threads: every closed connection holds a client port in TIME_WAIT.
    #[arg(long, default_value_t = 40_000)]
    max_conns: u64,
    /// Seconds after the window to let in-flight connections finish.
    #[arg(long, default_value_t = 2.0)]
    drain: f64,
}

fn echo(bind: IpAddr, port: u16, threads: usize) -> i32 {
    sys::raise_nofile();
    let term = TermSignals::block();
    let addr = SocketAddr::new(bind, port);
    let mut listeners = Vec::new();
    for _ in 0..threads.max(1) {
        match echo::bind(&addr) {
            Ok(fd) => listeners.push(fd),
            Err(e) => {
                println!(
                    "{}",
                    serde_json::json!({"error": format!("bind {addr}: {e}")})
                );
                return 1;
            }
        }
    }
    for lfd in listeners {
        std::thread::spawn(move || {
            if let Err(e) = echo::serve(lfd) {
                eprintln!("echo thread: {e}");
                std::process::exit(1);
            }
        });
    }
    println!("LISTENING");
    term.wait();
    0
}

fn rate(args: RateArgs) -> i32 {
    let RateArgs {
        connect,
        port,
        threads,
        concurrency,
        duration,
        max_conns,
        drain,
    } = args;
    sys::raise_nofile();
    let threads = threads.max(1);
    // Every thread starts at once, after all are spawned.
    let t_start = Instant::now() + Duration::from_millis(100);
    let per_thread = split_evenly(max_conns, threads);
    let handles: Vec<_> = per_thread
        .into_iter()
        .map(|cap| {
            let plan = rate::Plan {
                target: SocketAddr::new(connect, port),
                concurrency,
                t_start,
                window: Duration::from_secs_f64(duration),
                drain: Duration::from_secs_f64(drain),
                max_conns: cap,
            };
            std::thread::spawn(move || rate::run(plan))
        })
        .collect();
    let mut total = stats::Counts::default();
    for h in handles {
        match h.join() {
            Ok(c) => total.merge(c),
            Err(_) => total.error("thread_panic".into()),
        }
    }
    println!("{}", stats::summary(total, threads, duration));
    0
}

/// `total` shared over `parts` as evenly as possible (the first ones get the remainder).
fn split_evenly(total: u64, parts: usize) -> Vec<u64> {
    let (base, extra) = (total / parts as u64, total % parts as u64);
    (0..parts as u64)
        .map(|i| base + u64::from(i < extra))
        .collect()
}

fn main() {
    let code = match Cli::parse().cmd {
        Cmd::Echo {
            bind,
            port,
            threads,
        } => echo(bind, port, threads),
        Cmd::Rate(args) => rate(args),
    };
    std::process::exit(code);
}

#[cfg(test)]
mod tests {
    use super::split_evenly;

    #[test]
    fn split_evenly_spreads_the_remainder() {
        assert_eq!(split_evenly(10, 3), vec![4, 3, 3]);
        assert_eq!(split_evenly(2, 4), vec![1, 1, 0, 0]);
    }
}
