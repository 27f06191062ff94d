//! Running a command the test needs to succeed.
use std::io::Write;
use std::process::{Command, Output, Stdio};

/// Runs `argv` and returns its stdout; panics with `argv` and its stderr when it fails.
pub fn run(argv: &[&str]) -> String {
    let out = command(argv).output().expect("spawn");
    stdout_of_success(argv, out)
}

/// `run` with `input` written to the command's stdin.
pub fn run_stdin(argv: &[&str], input: &str) -> String {
    let mut child = command(argv)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    // Dropping the handle after the write closes the pipe: the command sees EOF.
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    stdout_of_success(argv, child.wait_with_output().unwrap())
}

fn command(argv: &[&str]) -> Command {
    let mut cmd = Command::new(argv[0]);
    cmd.args(&argv[1..]);
    cmd
}

fn stdout_of_success(argv: &[&str], out: Output) -> String {
    assert!(
        out.status.success(),
        "{argv:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn returns_stdout() {
        assert_eq!(run(&["echo", "a", "b"]), "a b\n");
    }

    #[test]
    fn feeds_stdin() {
        assert_eq!(run_stdin(&["cat"], "x\ny"), "x\ny");
    }

    #[test]
    #[should_panic(expected = "[\"sh\", \"-c\", \"echo oops >&2; exit 3\"] failed: oops")]
    fn failure_names_argv_and_stderr() {
        run(&["sh", "-c", "echo oops >&2; exit 3"]);
    }

    #[test]
    #[should_panic(expected = "failed: no")]
    fn stdin_failure_names_stderr() {
        run_stdin(&["sh", "-c", "cat >&2; exit 1"], "no");
    }
}
