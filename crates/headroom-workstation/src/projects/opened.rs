//! The manifests this store read last, kept parsed while their file is the same one: a
//! three-hour transcript's manifest is megabytes of JSON, and opening the project for each
//! typed edit and each change would parse it again. So are what the listing shows of every
//! project (name, time, segments), which would otherwise parse every manifest each time the
//! Projects view is shown. The file is known to be the same by its inode, length and times
//! (every whole save writes a new file and renames it into place), so a write by another
//! window or process is always read.

use super::Project;
use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::sync::{Arc, Mutex};

/// Manifests kept parsed: the open project and the one before it.
const KEPT: usize = 2;

/// Which file a manifest was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileKey {
    dev: u64,
    ino: u64,
    len: u64,
    ctime_ns: i128,
    mtime_ns: i128,
}

impl FileKey {
    pub(crate) fn of(metadata: &std::fs::Metadata) -> FileKey {
        let ns = |s: i64, ns: i64| i128::from(s) * 1_000_000_000 + i128::from(ns);
        FileKey {
            dev: metadata.dev(),
            ino: metadata.ino(),
            len: metadata.len(),
            ctime_ns: ns(metadata.ctime(), metadata.ctime_nsec()),
            mtime_ns: ns(metadata.mtime(), metadata.mtime_nsec()),
        }
    }
}

/// What a listing shows of a project, as its manifest says (before the typed edits).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Head {
    pub name: String,
    pub modified_unix_ms: u64,
    pub segments: usize,
}

impl Head {
    pub(crate) fn of(project: &Project) -> Head {
        Head {
            name: project.name.clone(),
            modified_unix_ms: project.modified_unix_ms,
            segments: project.segments.len(),
        }
    }
}

/// The manifests read last, by project id, most recent first; and every project's head.
#[derive(Clone, Default)]
pub(crate) struct Opened {
    manifests: Arc<Mutex<Vec<(String, FileKey, Project)>>>,
    heads: Arc<Mutex<HashMap<String, (FileKey, Head)>>>,
}

impl std::fmt::Debug for Opened {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Opened")
    }
}

impl Opened {
    /// The manifest of `id` as parsed from the file `key`, when it was.
    pub(crate) fn get(&self, id: &str, key: FileKey) -> Option<Project> {
        let kept = self.manifests.lock().unwrap_or_else(|e| e.into_inner());
        kept.iter()
            .find(|(i, k, _)| i == id && *k == key)
            .map(|(_, _, p)| p.clone())
    }

    /// Keeps `manifest` as parsed from the file `key` (replacing what was kept of `id`).
    pub(crate) fn keep(&self, id: &str, key: FileKey, manifest: &Project) {
        self.keep_head(id, key, Head::of(manifest));
        let mut kept = self.manifests.lock().unwrap_or_else(|e| e.into_inner());
        kept.retain(|(i, _, _)| i != id);
        kept.insert(0, (id.to_string(), key, manifest.clone()));
        kept.truncate(KEPT);
    }

    /// The head of `id` as read from the file `key`, when it was.
    pub(crate) fn head(&self, id: &str, key: FileKey) -> Option<Head> {
        let heads = self.heads.lock().unwrap_or_else(|e| e.into_inner());
        heads
            .get(id)
            .filter(|(k, _)| *k == key)
            .map(|(_, head)| head.clone())
    }

    pub(crate) fn keep_head(&self, id: &str, key: FileKey, head: Head) {
        let mut heads = self.heads.lock().unwrap_or_else(|e| e.into_inner());
        heads.insert(id.to_string(), (key, head));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(path: &std::path::Path) -> FileKey {
        FileKey::of(&std::fs::metadata(path).unwrap())
    }

    #[test]
    fn a_file_written_again_has_another_key_even_of_the_same_length() {
        let dir = std::env::temp_dir().join(format!("headroom-opened-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("project.json");
        headroom_base::fsutil::write_atomic(&path, b"{\"a\": 1}").unwrap();
        let first = key(&path);
        assert_eq!(first, key(&path), "the same file keeps its key");
        headroom_base::fsutil::write_atomic(&path, b"{\"a\": 2}").unwrap();
        assert_ne!(first, key(&path), "rewritten with the same length");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
