//! One command on an FRR daemon's vty socket (`<dir>/<daemon>.vty`), the protocol vtysh speaks: the
//! command and a NUL; the daemon's answer, then three NULs and a status byte (0: success). A socket
//! round trip, no process: the daemon never runs vtysh.
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long one command may take, all reads together: a bgpd that does not answer must not hold
/// the control socket's answer.
pub const TIMEOUT: Duration = Duration::from_secs(1);
/// An answer larger than this is refused (a few thousand neighbors' JSON fits).
const MAX_ANSWER: usize = 16 << 20;
const END: &[u8] = b"\0\0\0";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VtyError {
    /// No socket at that path: the daemon is not installed or not running with this directory.
    Missing(PathBuf),
    /// The socket is there but the daemon did not take the connection, or it broke.
    Io(PathBuf, String),
    /// No complete answer within TIMEOUT.
    Timeout(PathBuf),
    /// The daemon answered with a non-zero status (an unknown or failed command).
    Refused(PathBuf, String),
    TooLarge(PathBuf),
}

impl std::fmt::Display for VtyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VtyError::Missing(p) => write!(f, "{} does not exist", p.display()),
            VtyError::Io(p, e) => write!(f, "{}: {e}", p.display()),
            VtyError::Timeout(p) => write!(
                f,
                "{}: no answer within {} ms",
                p.display(),
                TIMEOUT.as_millis()
            ),
            VtyError::Refused(p, e) => write!(f, "{}: command refused: {e}", p.display()),
            VtyError::TooLarge(p) => {
                write!(f, "{}: answer larger than {MAX_ANSWER} bytes", p.display())
            }
        }
    }
}

/// `command`'s answer from the daemon whose socket is `dir/<daemon>.vty`. The connection is
/// raised to the enable node first, as vtysh does: bfdd's `show bfd peers` is only there.
pub fn command(dir: &Path, daemon: &str, command: &str) -> Result<String, VtyError> {
    let path = dir.join(format!("{daemon}.vty"));
    let mut stream = match connect(&path) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(VtyError::Missing(path)),
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
            return Err(VtyError::Io(
                path,
                "not accepting connections (its listen queue is full)".into(),
            ))
        }
        Err(e) => return Err(VtyError::Io(path, e.to_string())),
    };
    let deadline = Instant::now() + TIMEOUT;
    exchange(&mut stream, &path, "enable", deadline)?;
    exchange(&mut stream, &path, command, deadline)
}

/// A connection that does not wait: std's `UnixStream::connect` blocks without a timeout while the
/// daemon's listen queue is full (a hung daemon), and every request would then hang with it. A
/// non-blocking Unix connect either completes at once or fails with EAGAIN.
fn connect(path: &Path) -> std::io::Result<UnixStream> {
    use std::os::fd::FromRawFd;
    use std::os::unix::ffi::OsStrExt;
    let bytes = path.as_os_str().as_bytes();
    // SAFETY: an all-zero sockaddr_un is a valid value of the type.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    if bytes.len() >= addr.sun_path.len() || bytes.contains(&0) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a usable socket path (too long or with a NUL)",
        ));
    }
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (d, s) in addr.sun_path.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    // SAFETY: socket(2) with constant arguments; the result is checked.
    let fd = unsafe {
        libc::socket(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd is a socket this function just opened and nothing else owns; the stream closes it.
    let stream = unsafe { UnixStream::from_raw_fd(fd) };
    let len = std::mem::size_of::<libc::sa_family_t>() + bytes.len() + 1;
    // SAFETY: addr is an initialized sockaddr_un and len does not exceed its size (checked above).
    let rc = unsafe {
        libc::connect(
            fd,
            (&addr as *const libc::sockaddr_un).cast::<libc::sockaddr>(),
            len as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    stream.set_nonblocking(false)?;
    Ok(stream)
}

/// One command and its answer on an open connection, done by `deadline`.
fn exchange(
    stream: &mut UnixStream,
    path: &Path,
    command: &str,
    deadline: Instant,
) -> Result<String, VtyError> {
    let io = |e: std::io::Error| match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
            VtyError::Timeout(path.to_path_buf())
        }
        _ => VtyError::Io(path.to_path_buf(), e.to_string()),
    };
    stream.set_write_timeout(Some(TIMEOUT)).map_err(io)?;
    let mut request = command.as_bytes().to_vec();
    request.push(0);
    stream.write_all(&request).map_err(io)?;
    let mut answer = Vec::new();
    let mut buf = [0u8; 64 * 1024];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(VtyError::Timeout(path.to_path_buf()));
        }
        stream.set_read_timeout(Some(left)).map_err(io)?;
        let n = stream.read(&mut buf).map_err(io)?;
        if n == 0 {
            return Err(VtyError::Io(
                path.to_path_buf(),
                "closed before the end of the answer".into(),
            ));
        }
        answer.extend_from_slice(&buf[..n]);
        if let Some(status) = finished(&answer) {
            let text = String::from_utf8_lossy(&answer[..answer.len() - 4]).into_owned();
            return match status {
                0 => Ok(text),
                _ => Err(VtyError::Refused(
                    path.to_path_buf(),
                    text.trim().to_string(),
                )),
            };
        }
        if answer.len() > MAX_ANSWER {
            return Err(VtyError::TooLarge(path.to_path_buf()));
        }
    }
}

/// The status byte once `answer` holds the end marker (three NULs and the status).
fn finished(answer: &[u8]) -> Option<u8> {
    let n = answer.len();
    (n >= 4 && &answer[n - 4..n - 1] == END).then(|| answer[n - 1])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;

    fn serve_once(
        dir: &Path,
        daemon: &str,
        reply: &'static [u8],
    ) -> std::thread::JoinHandle<Vec<u8>> {
        let l = UnixListener::bind(dir.join(format!("{daemon}.vty"))).unwrap();
        std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let read_command = |s: &mut UnixStream| {
                let mut got = Vec::new();
                let mut b = [0u8; 1];
                while s.read(&mut b).unwrap() == 1 && b[0] != 0 {
                    got.push(b[0]);
                }
                got
            };
            assert_eq!(read_command(&mut s), b"enable");
            s.write_all(b"\0\0\0\0").unwrap();
            let got = read_command(&mut s);
            // In two writes: the reader must join them.
            s.write_all(&reply[..reply.len() / 2]).unwrap();
            std::thread::sleep(Duration::from_millis(20));
            s.write_all(&reply[reply.len() / 2..]).unwrap();
            got
        })
    }

    fn tmpdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("perigee-vty-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn answer_up_to_the_end_marker_and_its_status() {
        let d = tmpdir("ok");
        let h = serve_once(&d, "bgpd", b"{\"a\": 1}\n\0\0\0\0");
        assert_eq!(command(&d, "bgpd", "show x json").unwrap(), "{\"a\": 1}\n");
        assert_eq!(h.join().unwrap(), b"show x json");
        let h = {
            std::fs::remove_file(d.join("bfdd.vty")).ok();
            serve_once(&d, "bfdd", b"% Unknown command: show y\n\0\0\0\x02")
        };
        let e = command(&d, "bfdd", "show y").unwrap_err();
        assert_eq!(
            e,
            VtyError::Refused(d.join("bfdd.vty"), "% Unknown command: show y".into())
        );
        h.join().unwrap();
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn no_socket_is_missing_and_a_silent_daemon_times_out() {
        let d = tmpdir("silent");
        assert_eq!(
            command(&d, "bgpd", "show").unwrap_err(),
            VtyError::Missing(d.join("bgpd.vty"))
        );
        // Listening, never answering: the read gives up after TIMEOUT.
        let _l = UnixListener::bind(d.join("bgpd.vty")).unwrap();
        let t = Instant::now();
        assert_eq!(
            command(&d, "bgpd", "show").unwrap_err(),
            VtyError::Timeout(d.join("bgpd.vty"))
        );
        assert!(
            t.elapsed() < TIMEOUT * 60,
            "gave up, not hung: {:?}",
            t.elapsed()
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_daemon_that_stopped_accepting_fails_at_once() {
        let d = tmpdir("backlog");
        let path = d.join("bgpd.vty");
        let _l = UnixListener::bind(&path).unwrap();
        // Fill its listen queue as a hung daemon's fills: connections nobody accepts.
        let mut held = Vec::new();
        while held.len() < 10_000 {
            match connect(&path) {
                Ok(s) => held.push(s),
                Err(e) => {
                    assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock, "{e}");
                    break;
                }
            }
        }
        assert!(held.len() < 10_000, "the listen queue never filled");
        match command(&d, "bgpd", "show").unwrap_err() {
            VtyError::Io(p, why) => {
                assert_eq!(p, path);
                assert!(why.contains("not accepting connections"), "{why}");
            }
            e => panic!("{e:?}"),
        }
        drop(held);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
