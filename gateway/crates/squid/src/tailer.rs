//! Follows a log file like `tail -F`: survives rotation (new inode) and truncation, and only
//! hands out complete lines.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Lines longer than this are cut (a URL can be long, but not unbounded).
const MAX_LINE: usize = 64 * 1024;

pub struct AccessLogTailer {
    path: PathBuf,
    file: Option<File>,
    inode: u64,
    offset: u64,
    partial: Vec<u8>,
}

impl AccessLogTailer {
    /// Starts at the end of the current file (old lines were counted by an earlier run) or at
    /// the start of a file that appears later.
    pub fn new(path: impl Into<PathBuf>, from_start: bool) -> Self {
        let mut t = AccessLogTailer {
            path: path.into(),
            file: None,
            inode: 0,
            offset: 0,
            partial: Vec::new(),
        };
        if let Ok(f) = File::open(&t.path) {
            if let Ok(md) = f.metadata() {
                t.inode = md.ino();
                t.offset = if from_start { 0 } else { md.len() };
                t.file = Some(f);
            }
        }
        t
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Returns the complete lines written since the last call.
    pub fn poll(&mut self) -> io::Result<Vec<String>> {
        let mut lines = Vec::new();
        // Finish whatever the open file still holds (it may have been renamed away already).
        self.read_open_file(&mut lines)?;
        match std::fs::metadata(&self.path) {
            Ok(md) if md.ino() != self.inode || self.file.is_none() => {
                // Rotated (or first seen): switch to the new file from its start.
                self.flush_partial(&mut lines);
                self.file = File::open(&self.path).ok();
                self.inode = md.ino();
                self.offset = 0;
                self.read_open_file(&mut lines)?;
            }
            Ok(md) if md.len() < self.offset => {
                // Truncated in place: the old tail is gone, start over.
                self.partial.clear();
                self.offset = 0;
                self.read_open_file(&mut lines)?;
            }
            _ => {}
        }
        Ok(lines)
    }

    fn read_open_file(&mut self, lines: &mut Vec<String>) -> io::Result<()> {
        let Some(f) = self.file.as_mut() else {
            return Ok(());
        };
        let len = f.metadata()?.len();
        if len < self.offset {
            return Ok(()); // truncation is handled by the caller
        }
        f.seek(SeekFrom::Start(self.offset))?;
        let mut buf = Vec::new();
        let n = f.take(len - self.offset).read_to_end(&mut buf)?;
        self.offset += n as u64;
        for chunk in buf.split_inclusive(|b| *b == b'\n') {
            if chunk.ends_with(b"\n") {
                self.partial.extend_from_slice(&chunk[..chunk.len() - 1]);
                self.flush_partial(lines);
            } else if self.partial.len() < MAX_LINE {
                let room = MAX_LINE - self.partial.len();
                self.partial
                    .extend_from_slice(&chunk[..chunk.len().min(room)]);
            }
        }
        Ok(())
    }

    fn flush_partial(&mut self, lines: &mut Vec<String>) {
        if !self.partial.is_empty() {
            lines.push(String::from_utf8_lossy(&self.partial).into_owned());
            self.partial.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn tmpdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("pq-tailer-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn append(p: &Path, s: &str) {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
            .unwrap();
        f.write_all(s.as_bytes()).unwrap();
    }

    #[test]
    fn follows_partial_lines_rotation_and_truncation() {
        let d = tmpdir("rot");
        let log = d.join("access.log");
        append(&log, "old line\n");
        let mut t = AccessLogTailer::new(&log, false);
        assert!(t.poll().unwrap().is_empty(), "starts at the end");
        append(&log, "one\ntw");
        assert_eq!(t.poll().unwrap(), vec!["one"]);
        append(&log, "o\n");
        assert_eq!(t.poll().unwrap(), vec!["two"]);
        // Rotation: the writer finishes the old file, then a new one appears.
        append(&log, "three\n");
        std::fs::rename(&log, d.join("access.log.1")).unwrap();
        append(&log, "four\n");
        assert_eq!(t.poll().unwrap(), vec!["three", "four"]);
        // Truncation in place.
        std::fs::write(&log, "").unwrap();
        assert!(t.poll().unwrap().is_empty());
        append(&log, "five\n");
        assert_eq!(t.poll().unwrap(), vec!["five"]);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn file_that_appears_later_is_read_from_its_start() {
        let d = tmpdir("late");
        let log = d.join("access.log");
        let mut t = AccessLogTailer::new(&log, false);
        assert!(t.poll().unwrap().is_empty());
        append(&log, "a\nb\n");
        assert_eq!(t.poll().unwrap(), vec!["a", "b"]);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
