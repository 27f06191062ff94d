//! `satlab-link`: bridges two interfaces through an emulated satellite link.
use satlab_link::app::{self, Options};
use satlab_link::params::{parse_config, LinkParams};
use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "usage: satlab-link --a IFACE_A --b IFACE_B --control SOCKET \
[--config FILE.json] [--seed N] [--pidfile FILE]

Frames received on A cross direction a_to_b and leave on B; frames received on B cross
b_to_a and leave on A. Control: newline-delimited JSON on the Unix socket
({\"cmd\":\"get\"|\"set\"|\"stats\"|\"reset_counters\"|\"shutdown\"}).";

fn usage_error(msg: &str) -> ExitCode {
    eprintln!("satlab-link: {msg}\n{USAGE}");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let (mut a, mut b, mut control, mut config, mut pidfile, mut seed) =
        (None, None, None, None, None, None);
    while let Some(flag) = args.next() {
        if flag == "-h" || flag == "--help" {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        let Some(value) = args.next() else {
            return usage_error(&format!("{flag} needs a value"));
        };
        match flag.as_str() {
            "--a" => a = Some(value),
            "--b" => b = Some(value),
            "--control" => control = Some(PathBuf::from(value)),
            "--config" => config = Some(PathBuf::from(value)),
            "--pidfile" => pidfile = Some(PathBuf::from(value)),
            "--seed" => match value.parse::<u64>() {
                Ok(s) => seed = Some(s),
                Err(_) => {
                    return usage_error(&format!("--seed: '{value}' is not an unsigned integer"))
                }
            },
            _ => return usage_error(&format!("unknown argument '{flag}'")),
        }
    }
    let (Some(iface_a), Some(iface_b), Some(control)) = (a, b, control) else {
        return usage_error("--a, --b and --control are required");
    };
    if iface_a == iface_b {
        return usage_error("--a and --b must be different interfaces");
    }
    let (a_to_b, b_to_a) = match config {
        None => (LinkParams::default(), LinkParams::default()),
        Some(path) => {
            let parsed = std::fs::read_to_string(&path)
                .map_err(|e| e.to_string())
                .and_then(|text| parse_config(&text));
            match parsed {
                Ok(p) => p,
                Err(e) => {
                    eprintln!("satlab-link: config {}: {e}", path.display());
                    return ExitCode::from(2);
                }
            }
        }
    };
    let seed =
        seed.unwrap_or_else(|| satlab_link::sys::now_ns() ^ ((std::process::id() as u64) << 32));
    let opts = Options {
        iface_a,
        iface_b,
        control,
        pidfile,
        seed,
        a_to_b,
        b_to_a,
    };
    match app::run(opts) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("satlab-link: {e}");
            ExitCode::FAILURE
        }
    }
}
