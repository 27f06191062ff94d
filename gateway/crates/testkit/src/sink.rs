//! The receiving end of a test flow.
use std::io::Read;

/// Reads `r` until EOF and returns how many bytes came; panics on a read error.
pub fn count_to_eof(r: &mut impl Read) -> usize {
    let mut buf = vec![0u8; 1 << 16];
    let mut n = 0;
    loop {
        match r.read(&mut buf) {
            Ok(0) => return n,
            Ok(k) => n += k,
            Err(e) => panic!("sink read: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{self, Cursor};

    #[test]
    fn counts_every_byte() {
        let data = vec![7u8; (1 << 16) * 2 + 5];
        assert_eq!(count_to_eof(&mut Cursor::new(data)), (1 << 16) * 2 + 5);
        assert_eq!(count_to_eof(&mut io::empty()), 0);
    }

    struct Broken;
    impl Read for Broken {
        fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
            Err(io::Error::other("reset"))
        }
    }

    #[test]
    #[should_panic(expected = "sink read: reset")]
    fn read_error_panics() {
        count_to_eof(&mut Broken);
    }
}
