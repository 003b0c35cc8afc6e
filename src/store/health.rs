//! Whether the database file is whole, and who holds it: a damaged file (truncated, not a
//! database, emptied under live connections) is named before SQLite reads it — an emptied file
//! would otherwise open as a valid empty database, or wait on its live readers' locks — and a
//! busy one names the processes holding its locks (`/proc/locks`).

use std::os::unix::fs::MetadataExt;
use std::path::Path;

const MAGIC: &[u8; 16] = b"SQLite format 3\0";
const HEADER: usize = 100;

/// What a look at the database file (and its WAL files beside it) shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileFacts {
    /// The database file's length in bytes.
    pub len: u64,
    /// Its first bytes (up to the 100-byte header).
    pub header: Vec<u8>,
    /// The length of `<db>-wal`, if it exists.
    pub wal_len: Option<u64>,
    /// Whether `<db>-shm` (the WAL index) exists.
    pub shm: bool,
}

/// Why the file cannot be an intact orch database (pure: the facts in, the words out); `None`
/// when it may be one (SQLite has the last word). A file of 0 bytes alone is a database not
/// yet written (SQLite writes its first page when WAL mode is set, before any WAL file exists).
pub fn damage(f: &FileFacts) -> Option<String> {
    if f.len == 0 {
        if f.wal_len.is_some_and(|n| n > 0) || f.shm {
            return Some(
                "it is empty (0 bytes) while its write-ahead log files are beside it: it was truncated under processes that had it open".into(),
            );
        }
        return None;
    }
    if (f.len as usize) < HEADER || f.header.len() < HEADER {
        return Some(format!(
            "it is truncated ({} bytes, shorter than a database header)",
            f.len
        ));
    }
    if &f.header[..16] != MAGIC {
        return Some("it is not a SQLite database (no SQLite header)".into());
    }
    let page = match u16::from_be_bytes([f.header[16], f.header[17]]) {
        1 => 65536u64,
        n if n >= 512 && n.is_power_of_two() => n as u64,
        n => return Some(format!("its header is damaged (page size {n})")),
    };
    if !f.len.is_multiple_of(page) {
        return Some(format!(
            "it is truncated mid-page ({} bytes, not a multiple of its page size {page})",
            f.len
        ));
    }
    // The header's page count is valid when its change counter matches the "valid for"
    // number; it may run ahead of the file only while a checkpoint copies pages from the WAL.
    let pages = u32::from_be_bytes(f.header[28..32].try_into().unwrap()) as u64;
    let valid = f.header[24..28] == f.header[92..96];
    if valid && f.wal_len.is_none() && f.len < pages * page {
        return Some(format!(
            "it is truncated ({} bytes; its header says {} pages of {page} bytes)",
            f.len, pages
        ));
    }
    None
}

/// The facts of the database file at `db` (`None`: no file there).
///
/// Read through a descriptor this process keeps open for good ([`kept_file`]), never one opened
/// and closed here: closing any descriptor of a file drops every POSIX lock the process holds
/// on it, its SQLite connections' included.
pub fn facts(db: &Path) -> std::io::Result<Option<FileFacts>> {
    use std::os::unix::fs::FileExt;
    let file = match kept_file(db) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let len = file.metadata()?.len();
    let mut header = vec![0u8; HEADER];
    let mut read = 0;
    // pread: the kept descriptor's offset is never moved (another thread may read it too).
    while read < HEADER {
        match file.read_at(&mut header[read..], read as u64) {
            Ok(0) => break,
            Ok(n) => read += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    header.truncate(read);
    let side = |suffix: &str| {
        let mut p = db.as_os_str().to_owned();
        p.push(suffix);
        std::fs::metadata(p).ok()
    };
    Ok(Some(FileFacts {
        len,
        header,
        wal_len: side("-wal").map(|m| m.len()),
        shm: side("-shm").is_some(),
    }))
}

/// A read-only descriptor of the file now at `path`, opened once per file (device and inode)
/// and then kept open until the process exits.
///
/// POSIX locks belong to a process and a file, not to a descriptor: `close` of *any*
/// descriptor of the database file drops every lock this process holds on it — those of its
/// SQLite connections too (SQLite's documented pitfall, "How To Corrupt An SQLite Database
/// File", 2.2). An outside reader (the `sqlite3` shell, a backup) then finds no other user,
/// takes the database as its own, and on closing checkpoints and deletes the WAL and its
/// index under the live connections: their writes go to deleted files and are lost. So a
/// process that may hold a connection never closes a descriptor of the database it opened
/// itself. (SQLite's own unix VFS keeps such descriptors the same way.) One descriptor per
/// file ever seen: a handful in a process's life (a rebuild replaces the file once).
fn kept_file(path: &Path) -> std::io::Result<std::sync::Arc<std::fs::File>> {
    use std::os::unix::fs::OpenOptionsExt;
    use std::sync::{Arc, Mutex};
    type Kept = Vec<((u64, u64), Arc<std::fs::File>)>;
    static KEPT: Mutex<Kept> = Mutex::new(Vec::new());
    let meta = std::fs::metadata(path)?;
    let key = (meta.dev(), meta.ino());
    let mut kept = KEPT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, f)) = kept.iter().find(|(k, _)| *k == key) {
        return Ok(f.clone());
    }
    // O_NOFOLLOW: the state directory is orch's own; a link put there is not followed.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    // The file opened may be a newer one than the one looked at: keep it under its own key.
    let m = file.metadata()?;
    let key = (m.dev(), m.ino());
    if let Some((_, f)) = kept.iter().find(|(k, _)| *k == key) {
        // Already kept: this second descriptor must not be closed either.
        std::mem::forget(file);
        return Ok(f.clone());
    }
    let file = Arc::new(file);
    kept.push((key, file.clone()));
    Ok(file)
}

/// One line of `/proc/locks` that matters here: a POSIX lock's holder, kind and inode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileLock {
    pub pid: i32,
    pub write: bool,
    /// (device major:minor as printed, inode)
    pub dev: String,
    pub inode: u64,
}

/// Parses `/proc/locks` (pure). Lines look like
/// `5: POSIX  ADVISORY  READ 12765 fe:00:10298732 128 128` (and `->` for a waiter, skipped).
pub fn parse_locks(text: &str) -> Vec<FileLock> {
    text.lines()
        .filter_map(|line| {
            let mut it = line.split_whitespace().skip(1);
            let class = it.next()?;
            if class == "->" || !matches!(class, "POSIX" | "OFDLCK") {
                return None;
            }
            let _advisory = it.next()?;
            let write = it.next()? == "WRITE";
            let pid: i32 = it.next()?.parse().ok()?;
            let (dev, inode) = it.next()?.rsplit_once(':')?;
            Some(FileLock {
                pid,
                write,
                dev: dev.to_string(),
                inode: inode.parse().ok()?,
            })
        })
        .collect()
}

/// The processes (other than this one) holding locks on the database or its WAL files, writers
/// first, each as `pid N (command line)`; empty when none is known.
pub fn holders(db: &Path) -> Vec<String> {
    lockers(db)
        .into_iter()
        .map(|(reader, pid)| {
            let cmd = command_of(pid);
            let cmd = crate::text::escape(&cmd);
            let role = if reader { "reading" } else { "writing" };
            // A stopped holder keeps its lock until it is continued or killed: say so.
            let stopped = if stopped(pid) { ", stopped" } else { "" };
            if cmd.is_empty() {
                format!("pid {pid} ({role}{stopped})")
            } else {
                format!("pid {pid} {role}{stopped}: {cmd}")
            }
        })
        .collect()
}

/// The processes (other than this one) holding a write lock on the database's files: a
/// writer inside its transaction.
pub fn writers(db: &Path) -> Vec<i32> {
    lockers(db)
        .into_iter()
        .filter(|(reader, _)| !reader)
        .map(|(_, pid)| pid)
        .collect()
}

/// Whether process `pid` is stopped (SIGSTOP, a debugger, a frozen cgroup): it runs nothing
/// until it is continued.
pub fn stopped(pid: i32) -> bool {
    crate::process::proc_stat(pid).is_some_and(|s| matches!(s.state, 'T' | 't'))
}

/// Whether process `pid` runs orch: the same executable as this process, or one named `orch`
/// (an older binary replaced since it started shows as `orch (deleted)`).
pub fn is_orch(pid: i32) -> bool {
    let Ok(exe) = std::fs::read_link(format!("/proc/{pid}/exe")) else {
        return false;
    };
    if std::fs::read_link("/proc/self/exe").is_ok_and(|me| me == exe) {
        return true;
    }
    exe.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n == "orch" || n == "orch (deleted)")
}

/// What process `pid` runs: orch's own processes by their subcommand (`orch __supervise
/// <id>`), others by their whole command line; empty when it cannot be read.
pub fn command_of(pid: i32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            let words: Vec<String> = b
                .split(|c| *c == 0)
                .filter(|w| !w.is_empty())
                .map(|w| String::from_utf8_lossy(w).into_owned())
                .collect();
            // orch's own processes are told by their subcommand, not the long options.
            match words.iter().position(|w| w.starts_with("__")) {
                Some(i) => format!("orch {}", words[i..].join(" ")),
                None => words.join(" "),
            }
        })
        .unwrap_or_default()
}

/// (reader, pid) of every process but this one with a lock on the database's files, writers
/// first, each pid once.
fn lockers(db: &Path) -> Vec<(bool, i32)> {
    let Ok(text) = std::fs::read_to_string("/proc/locks") else {
        return Vec::new();
    };
    let inodes: Vec<u64> = ["", "-wal", "-shm"]
        .iter()
        .filter_map(|suffix| {
            let mut p = db.as_os_str().to_owned();
            p.push(suffix);
            std::fs::metadata(p).ok().map(|m| m.ino())
        })
        .collect();
    let me = std::process::id() as i32;
    let mut found: Vec<(bool, i32)> = parse_locks(&text)
        .into_iter()
        .filter(|l| l.pid != me && inodes.contains(&l.inode))
        .map(|l| (!l.write, l.pid))
        .collect();
    found.sort();
    let mut seen = Vec::new();
    found
        .into_iter()
        .filter(|(_, pid)| {
            let new = !seen.contains(pid);
            seen.push(*pid);
            new
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(page: u16, pages: u32) -> Vec<u8> {
        let mut h = vec![0u8; HEADER];
        h[..16].copy_from_slice(MAGIC);
        h[16..18].copy_from_slice(&page.to_be_bytes());
        h[24..28].copy_from_slice(&7u32.to_be_bytes());
        h[28..32].copy_from_slice(&pages.to_be_bytes());
        h[92..96].copy_from_slice(&7u32.to_be_bytes());
        h
    }

    fn facts(len: u64, header: Vec<u8>, wal_len: Option<u64>, shm: bool) -> FileFacts {
        FileFacts {
            len,
            header,
            wal_len,
            shm,
        }
    }

    #[test]
    fn an_empty_file_is_new_unless_its_wal_files_are_beside_it() {
        assert_eq!(damage(&facts(0, vec![], None, false)), None);
        let d = damage(&facts(0, vec![], None, true)).unwrap();
        assert!(d.contains("truncated under processes"), "{d}");
        assert!(damage(&facts(0, vec![], Some(8272), false)).is_some());
        // An empty WAL left without its index is no sign of anything.
        assert_eq!(damage(&facts(0, vec![], Some(0), false)), None);
    }

    #[test]
    fn short_foreign_and_mid_page_files_are_named() {
        let d = damage(&facts(50, vec![b'S'; 50], None, false)).unwrap();
        assert!(d.contains("50 bytes"), "{d}");
        let d = damage(&facts(8192, vec![0xA5; HEADER], None, false)).unwrap();
        assert!(d.contains("not a SQLite database"), "{d}");
        let d = damage(&facts(4096 + 100, header(4096, 2), None, false)).unwrap();
        assert!(d.contains("mid-page") && d.contains("4196"), "{d}");
        let d = damage(&facts(4096, header(3000, 1), None, false)).unwrap();
        assert!(d.contains("page size 3000"), "{d}");
    }

    #[test]
    fn fewer_pages_than_the_header_says_is_truncation_unless_a_wal_is_being_copied() {
        assert_eq!(damage(&facts(8192, header(4096, 2), None, false)), None);
        let d = damage(&facts(4096, header(4096, 9), None, false)).unwrap();
        assert!(d.contains("9 pages"), "{d}");
        // A checkpoint copying pages from the WAL may write page 1 before the last page.
        assert_eq!(
            damage(&facts(4096, header(4096, 9), Some(8272), true)),
            None
        );
        // A stale page count (change counter not matching) says nothing.
        let mut stale = header(4096, 9);
        stale[92..96].copy_from_slice(&3u32.to_be_bytes());
        assert_eq!(damage(&facts(4096, stale, None, false)), None);
        // 65536-byte pages are written as 1.
        assert_eq!(damage(&facts(65536, header(1, 1), None, false)), None);
    }

    #[test]
    fn proc_locks_lines_are_parsed_and_waiters_skipped() {
        let text = "1: FLOCK  ADVISORY  WRITE 10959 fe:00:5660690 0 EOF\n\
                    5: POSIX  ADVISORY  READ 12765 fe:00:10298732 128 128\n\
                    6: POSIX  ADVISORY  WRITE 12766 fe:00:10298705 120 120\n\
                    6: -> POSIX  ADVISORY  WRITE 12767 fe:00:10298705 120 120\n\
                    7: OFDLCK ADVISORY  READ -1 00:06:9 0 EOF\n";
        let locks = parse_locks(text);
        assert_eq!(
            locks,
            vec![
                FileLock {
                    pid: 12765,
                    write: false,
                    dev: "fe:00".into(),
                    inode: 10298732
                },
                FileLock {
                    pid: 12766,
                    write: true,
                    dev: "fe:00".into(),
                    inode: 10298705
                },
                FileLock {
                    pid: -1,
                    write: false,
                    dev: "00:06".into(),
                    inode: 9
                },
            ]
        );
    }
}
