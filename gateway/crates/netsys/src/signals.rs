//! SIGTERM/SIGINT taken by waiting rather than by a handler: block them before spawning any
//! thread (threads inherit the mask, so none of them is interrupted), then `wait` on one.
use std::mem::zeroed;

pub struct TermSignals(libc::sigset_t);

impl TermSignals {
    fn set() -> libc::sigset_t {
        // SAFETY: sigset operations on a local set.
        unsafe {
            let mut set: libc::sigset_t = zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGTERM);
            libc::sigaddset(&mut set, libc::SIGINT);
            set
        }
    }

    fn mask(how: libc::c_int) -> libc::sigset_t {
        let set = Self::set();
        // SAFETY: set is a valid sigset; the old mask is not asked for.
        unsafe { libc::pthread_sigmask(how, &set, std::ptr::null_mut()) };
        set
    }

    /// Block SIGTERM and SIGINT on this thread and on the threads it spawns from now on.
    pub fn block() -> TermSignals {
        TermSignals(Self::mask(libc::SIG_BLOCK))
    }

    /// Undo `block` on this thread (a process started by a blocking one inherits its mask).
    pub fn unblock() {
        Self::mask(libc::SIG_UNBLOCK);
    }

    /// Make `cmd`'s child start with the signals unblocked: a child of the blocking daemon
    /// inherits its mask and could not be stopped by them (systemd, an operator's kill).
    pub fn unblock_in_child(cmd: &mut std::process::Command) {
        use std::os::unix::process::CommandExt;
        // SAFETY: only pthread_sigmask on the child's own mask between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                Self::unblock();
                Ok(())
            });
        }
    }

    /// Wait until one of them arrives; its number.
    pub fn wait(&self) -> libc::c_int {
        let mut sig: libc::c_int = 0;
        // SAFETY: self.0 holds the blocked signals; sig is a valid out-parameter.
        unsafe { libc::sigwait(&self.0, &mut sig) };
        sig
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocked(sig: libc::c_int) -> bool {
        // SAFETY: reading this thread's mask into a local set.
        unsafe {
            let mut cur: libc::sigset_t = zeroed();
            libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut cur);
            libc::sigismember(&cur, sig) == 1
        }
    }

    #[test]
    fn a_blocked_term_signal_is_waited_for_then_unblocked() {
        // On a thread of its own: the mask and the signal are this thread's only.
        std::thread::spawn(|| {
            let term = TermSignals::block();
            assert!(blocked(libc::SIGTERM) && blocked(libc::SIGINT));
            // SAFETY: a signal to this very thread, which has it blocked (it stays pending).
            unsafe { libc::pthread_kill(libc::pthread_self(), libc::SIGINT) };
            assert_eq!(term.wait(), libc::SIGINT);
            TermSignals::unblock();
            assert!(!blocked(libc::SIGTERM) && !blocked(libc::SIGINT));
        })
        .join()
        .unwrap();
    }
}
