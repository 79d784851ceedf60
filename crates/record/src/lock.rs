//! The exclusive lock a recorder holds on its span log while it writes: two
//! writers appending to one file interleave their lines into an unreadable log
//! (one recorder per worker of a process pool does that), so the second is refused,
//! naming the process that holds the file when the system says (Linux's
//! `/proc/locks`). The lock goes with the file's handle, so the writer thread
//! holds it until the run's end.

use std::fs::File;
use std::path::Path;

use crate::recorder::RecordError;

/// Takes the lock on `file` (opened from `path`), without waiting.
pub(crate) fn lock(file: &File, path: &Path) -> Result<(), RecordError> {
    match fs4::FileExt::try_lock(file) {
        Ok(()) => Ok(()),
        Err(fs4::TryLockError::WouldBlock) => Err(RecordError::Locked {
            path: path.to_path_buf(),
            holder: holder(file).unwrap_or_else(|| "another process".into()),
        }),
        Err(fs4::TryLockError::Error(source)) => Err(RecordError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// "process 4031 (python worker.py)" for the holder of `file`'s lock, when
/// `/proc/locks` names it.
fn holder(file: &File) -> Option<String> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::MetadataExt;
        let ino = file.metadata().ok()?.ino();
        let locks = std::fs::read_to_string("/proc/locks").ok()?;
        let pid = holder_pid(&locks, ino)?;
        let me = if pid == std::process::id() {
            ", this process"
        } else {
            ""
        };
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline"))
            .map(|b| {
                let words: Vec<String> = b
                    .split(|&c| c == 0)
                    .filter(|w| !w.is_empty())
                    .map(|w| String::from_utf8_lossy(w).into_owned())
                    .collect();
                words.join(" ")
            })
            .unwrap_or_default();
        let cmd = cmd.chars().take(120).collect::<String>();
        Some(if cmd.is_empty() {
            format!("process {pid}{me}")
        } else {
            format!("process {pid}{me}: {cmd}")
        })
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = file;
        None
    }
}

/// The process holding a `flock` on inode `ino`, from `/proc/locks` text
/// (`1: FLOCK  ADVISORY  WRITE 4031 fe:00:5391702 0 EOF`; waiters are marked `->`).
fn holder_pid(locks: &str, ino: u64) -> Option<u32> {
    locks.lines().find_map(|line| {
        let mut f = line.split_whitespace().skip(1);
        if f.next()? != "FLOCK" {
            return None;
        }
        let (_, _, pid, dev) = (f.next()?, f.next()?, f.next()?, f.next()?);
        let inode: u64 = dev.rsplit(':').next()?.parse().ok()?;
        (inode == ino).then(|| pid.parse().ok()).flatten()
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_holder_is_read_from_proc_locks_by_inode_skipping_waiters() {
        let locks = "1: POSIX  ADVISORY  WRITE 10 fe:00:77 0 EOF\n\
                     2: FLOCK  ADVISORY  WRITE 4031 fe:00:5391702 0 EOF\n\
                     2: -> FLOCK  ADVISORY  WRITE 4032 fe:00:5391702 0 EOF\n";
        assert_eq!(super::holder_pid(locks, 5391702), Some(4031));
        assert_eq!(super::holder_pid(locks, 77), None);
        assert_eq!(super::holder_pid(locks, 1), None);
    }
}
