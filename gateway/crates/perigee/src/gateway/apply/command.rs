//! The programs the apply steps run (`nft`, `ip`, `tc`), with argument vectors only, never
//! shell strings.
use std::io::Write;
use std::process::{Command, Stdio};

/// Run `prog args...`, optionally feeding `stdin`; Ok(stdout) on exit status 0, Err(stderr) otherwise.
pub fn run(prog: &str, args: &[String], stdin: Option<&str>) -> Result<String, String> {
    let mut cmd = Command::new(prog);
    cmd.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    let mut child = cmd.spawn().map_err(|e| format!("{prog}: {e}"))?;
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(text.as_bytes())
            .map_err(|e| format!("{prog} stdin: {e}"))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("{prog}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
        Err(format!("{prog} {}: {err}", args.join(" ")))
    }
}

/// One `nft -f -` transaction: `text` applies whole or not at all.
pub fn nft(text: &str) -> Result<(), String> {
    run("nft", &["-f".into(), "-".into()], Some(text)).map(|_| ())
}

pub fn ip(argv: &[String]) -> Result<(), String> {
    run("ip", argv, None).map(|_| ())
}

pub fn tc(argv: &[String]) -> Result<(), String> {
    run("tc", argv, None).map(|_| ())
}
