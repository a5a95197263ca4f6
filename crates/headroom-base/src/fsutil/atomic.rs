//! Writing a file whole or not at all: a temporary file of the writer's own beside the
//! target, synced, renamed over it, and the directory synced; temporaries of ended writers
//! are removed.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// Distinguishes the temporary files of writers in one process.
static NEXT_TEMP: AtomicU64 = AtomicU64::new(0);

/// Writes `bytes` to a temporary file of its own beside `path`, syncs it, renames it over
/// `path`, then syncs the directory so the rename itself survives a crash. Concurrent writers
/// of one path never share a temporary file: the last rename wins, whole. A file that exists
/// keeps its permissions.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let kept = std::fs::metadata(path).ok().map(|m| m.permissions());
    write_atomic_from(path, &mut &bytes[..], kept)
}

/// [`write_atomic`] for a file that holds a secret: readable and writable by its owner only
/// (0600), from the moment the temporary file exists.
pub fn write_atomic_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    #[cfg(unix)]
    let owner_only = Some(std::os::unix::fs::PermissionsExt::from_mode(0o600));
    #[cfg(not(unix))]
    let owner_only = None;
    write_atomic_from(path, &mut &bytes[..], owner_only)
}

/// [`write_atomic`] for a file that must be new: the finished temporary file is linked in
/// under `path` only if nothing is there (`AlreadyExists` otherwise, whatever it is: a file, a
/// link, a pipe that appeared meanwhile), so nothing is ever replaced.
pub fn write_atomic_new(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_atomic_with(path, &mut &bytes[..], None, Place::New)
}

/// Copies the file at `from` to `path` as [`write_atomic`] writes, reading it in pieces (a
/// large recording is never held in memory).
pub fn copy_atomic(from: &Path, path: &Path) -> std::io::Result<()> {
    let mut source = crate::input::open_regular(from)?;
    copy_atomic_from(&mut source, path)
}

/// Writes what `content` reads to `path` as [`write_atomic`] writes, in pieces.
pub fn copy_atomic_from(content: &mut dyn std::io::Read, path: &Path) -> std::io::Result<()> {
    let kept = std::fs::metadata(path).ok().map(|m| m.permissions());
    write_atomic_from(path, content, kept)
}

fn write_atomic_from(
    path: &Path,
    content: &mut dyn std::io::Read,
    permissions: Option<std::fs::Permissions>,
) -> std::io::Result<()> {
    write_atomic_with(path, content, permissions, Place::Replace)
}

/// How a finished temporary file takes its name.
#[derive(Clone, Copy)]
enum Place {
    /// Renamed over whatever is there.
    Replace,
    /// Linked in only where nothing is.
    New,
}

fn write_atomic_with(
    path: &Path,
    content: &mut dyn std::io::Read,
    permissions: Option<std::fs::Permissions>,
    place: Place,
) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let tmp = dir.join(temporary_name(name));
    let result = (|| {
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        if let Some(p) = &permissions {
            // Created with no more than the final mode, so a secret is never readable by others.
            std::os::unix::fs::OpenOptionsExt::mode(
                &mut options,
                std::os::unix::fs::PermissionsExt::mode(p),
            );
        }
        let mut file = options.open(&tmp)?;
        if let Some(p) = permissions {
            file.set_permissions(p)?;
        }
        std::io::copy(content, &mut file)?;
        file.sync_all()?;
        match place {
            Place::Replace => std::fs::rename(&tmp, path)?,
            Place::New => {
                std::fs::hard_link(&tmp, path)?;
                std::fs::remove_file(&tmp)?;
            }
        }
        sync_dir(dir)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Marks a temporary file as Headroom's: a user's own `.notes.999999-1.tmp` is never one.
const TEMPORARY_MARK: &str = "headroom-";

/// A temporary file's name for a write of `name`: `.NAME.headroom-PID-N.tmp`, unique in this
/// process.
pub(super) fn temporary_name(name: &str) -> String {
    format!(
        ".{name}.{TEMPORARY_MARK}{}-{}.tmp",
        std::process::id(),
        NEXT_TEMP.fetch_add(1, Ordering::Relaxed)
    )
}

/// The process id in a temporary file's name as [`write_atomic`] makes it
/// (`.NAME.headroom-PID-N.tmp`), or `None` for any other name.
pub(super) fn temporary_owner(file_name: &str) -> Option<u32> {
    let middle = file_name.strip_prefix('.')?.strip_suffix(".tmp")?;
    let (rest, counter) = middle.rsplit_once('-')?;
    let (_, pid) = rest.rsplit_once('.')?;
    let pid = pid.strip_prefix(TEMPORARY_MARK)?;
    counter.parse::<u64>().ok()?;
    pid.parse().ok()
}

/// Whether a process with this id is running; `true` where that cannot be told, so a
/// temporary file is never taken from a writer that may be alive.
pub(super) fn process_alive(pid: u32) -> bool {
    if pid == std::process::id() {
        return true;
    }
    #[cfg(target_os = "linux")]
    {
        Path::new("/proc").join(pid.to_string()).exists()
    }
    #[cfg(not(target_os = "linux"))]
    {
        true
    }
}

/// Removes the temporary files in `dir` that a [`write_atomic`] killed midway left (their
/// writer's process is gone), and returns how many. A large import interrupted by a crash
/// would otherwise stay on disk, hidden, for good.
pub fn remove_stale_temporaries(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(temporary_owner) else {
            continue;
        };
        if process_alive(pid) {
            continue;
        }
        match std::fs::remove_file(entry.path()) {
            Ok(()) => removed += 1,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(file = %entry.path().display(), error = %e, "a stale temporary file stays")
            }
        }
    }
    removed
}

/// Makes a directory's entries (a rename) durable; a no-op where directories cannot be opened.
pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        std::fs::File::open(dir)?.sync_all()?;
    }
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_the_file_and_leaves_no_temporary() {
        let dir = std::env::temp_dir().join(format!("headroom-fsutil-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("out.txt");
        write_atomic(&path, b"one").unwrap();
        write_atomic(&path, b"two").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        assert!(write_atomic(&dir.join("missing/sub/out.txt"), b"x").is_err());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn permissions_are_kept_and_secrets_are_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("headroom-fsutil-mode-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        let path = dir.join("settings.toml");
        write_atomic(&path, b"one").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        write_atomic(&path, b"two").unwrap();
        assert_eq!(mode(&path), 0o640, "a rename over the file kept its mode");
        write_atomic_private(&path, b"key = 1").unwrap();
        assert_eq!(mode(&path), 0o600);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn temporary_names_give_their_writer() {
        assert_eq!(
            temporary_owner(".project.json.headroom-4242-7.tmp"),
            Some(4242)
        );
        assert_eq!(temporary_owner(".a.b-c.wav.headroom-17-0.tmp"), Some(17));
        assert_eq!(
            temporary_owner(&temporary_name("talk.wav")),
            Some(std::process::id())
        );
        for other in [
            // A user's own file shaped like the old names: never taken.
            ".notes.999999-1.tmp",
            ".project.json.4242-7.tmp",
            "project.json",
            ".project.json",
            ".x.tmp",
            ".x.12.tmp",
            ".x.a-1.tmp",
            "x.1-2.tmp",
        ] {
            assert_eq!(temporary_owner(other), None, "{other}");
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn only_temporaries_of_ended_processes_are_removed() {
        let dir =
            std::env::temp_dir().join(format!("headroom-fsutil-stale-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // A process that has ended: its id is free until reused, and nothing reuses it this fast
        // on a machine that wraps at pid_max.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let ended = child.id();
        child.wait().unwrap();
        let stale = dir.join(format!(".talk.wav.headroom-{ended}-0.tmp"));
        let ours = dir.join(format!(".talk.wav.headroom-{}-0.tmp", std::process::id()));
        let keep = dir.join("talk.wav");
        let users = dir.join(format!(".notes.{ended}-1.tmp"));
        for path in [&stale, &ours, &keep, &users] {
            std::fs::write(path, b"x").unwrap();
        }
        assert_eq!(remove_stale_temporaries(&dir), 1);
        assert!(!stale.exists());
        assert!(ours.exists(), "a live writer's file stays");
        assert!(keep.exists());
        assert!(
            users.exists(),
            "a user's file named like an old temporary stays"
        );
        assert_eq!(remove_stale_temporaries(&dir.join("missing")), 0);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn concurrent_writers_of_one_path_each_write_whole_and_leave_no_temporary() {
        let dir = std::env::temp_dir().join(format!("headroom-fsutil-race-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("manifest.json");
        let writers: Vec<_> = (0..8u8)
            .map(|i| {
                let path = path.clone();
                std::thread::spawn(move || write_atomic(&path, &vec![b'a' + i; 64 * 1024]))
            })
            .collect();
        for w in writers {
            w.join().unwrap().expect("every writer succeeds");
        }
        let written = std::fs::read(&path).unwrap();
        assert_eq!(written.len(), 64 * 1024);
        assert!(
            written.iter().all(|&b| b == written[0]),
            "one writer's bytes, whole"
        );
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            1,
            "no temporary left"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
