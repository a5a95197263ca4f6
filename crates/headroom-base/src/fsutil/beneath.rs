//! [`Beneath`]: a folder whose files are read and written only inside it, through no
//! symbolic link and no `..` (`openat2` where the kernel has it, else a walk of `openat`s).

use super::atomic::{process_alive, temporary_name, temporary_owner};
use std::path::{Path, PathBuf};

/// Why a path could not be used beneath a [`Beneath`] folder.
#[derive(Debug, thiserror::Error)]
pub enum BeneathError {
    /// A part of the path (a folder or the file itself) is a symbolic link: it is never
    /// followed, wherever it points.
    #[error("{link} is a symbolic link; Headroom {} only inside the {what} folder ({})", verb(*.writing), .root.display())]
    SymbolicLink {
        /// The link, relative to the folder (e.g. `exports`).
        link: String,
        root: PathBuf,
        /// What the folder is: `project`, `voice`.
        what: &'static str,
        writing: bool,
    },
    /// Not a path of plain names inside the folder (`..`, an absolute path, an empty one).
    #[error("{path:?} is not a path inside the {what} folder")]
    NotInside { path: String, what: &'static str },
    /// A file was wanted and something else is there (a folder, a pipe, a device).
    #[error("{} is not a regular file", .path.display())]
    NotAFile { path: PathBuf },
    #[error("{}: {source}", .path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn verb(writing: bool) -> &'static str {
    if writing {
        "writes"
    } else {
        "reads"
    }
}

impl BeneathError {
    /// Whether the path (or a folder on the way to it) does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, BeneathError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    }
}

/// A folder whose files are read and written only beneath it: every path given is resolved
/// from the folder's open handle one plain name at a time, and **no symbolic link is followed**
/// on the way, not even one that points back inside. A link is refused with
/// [`BeneathError::SymbolicLink`], which names it. The folder itself is opened as given (it
/// may be reached through links: that is the user's choice of where it lives).
///
/// On Linux a path resolves with `openat2(2)` and `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS` in
/// one call; where that is missing (kernels before 5.6, a sandbox that forbids it), or to say
/// which part is a link, by a walk of `openat(O_NOFOLLOW | O_DIRECTORY)` from the folder's
/// handle, which other Unix systems always use. Either way a link swapped in while a write runs
/// is refused, not followed. Elsewhere each part is checked before it is used.
///
/// Writes are atomic as [`write_atomic`]'s: a temporary file in the target's folder (opened
/// through that folder's handle), synced, renamed over the target in the same folder, and the
/// folder synced.
///
/// Everything else a caller does to the folder's files goes through the handle too, never
/// through a path looked up again after a check: listing ([`Beneath::read_dir`], `fdopendir`),
/// removing ([`Beneath::remove_file`], `unlinkat`), writing a file as it is made
/// ([`Beneath::create_new`] with `O_EXCL`, [`Beneath::create_truncate`]), repairing one in place
/// ([`Beneath::open_update`]) and renaming ([`Beneath::rename`], `renameat`). Only
/// [`Beneath::file_path`] hands out a path, for readers that take one.
#[derive(Debug)]
pub struct Beneath {
    root: PathBuf,
    what: &'static str,
    #[cfg(unix)]
    dir: std::os::fd::OwnedFd,
    /// Try `openat2` first (tests turn it off to exercise the walk).
    #[cfg(target_os = "linux")]
    fast: bool,
}

/// A checked relative path: its plain names, the last one split off.
struct Parts<'a> {
    folders: Vec<&'a std::ffi::OsStr>,
    name: &'a std::ffi::OsStr,
}

/// What an entry in a folder is, told without following it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    File,
    Folder,
    /// A symbolic link: listed, never followed, never opened, written or removed.
    Link,
    /// A pipe, a socket, a device.
    Other,
}

/// One entry of a folder listed by [`Beneath::read_dir`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub name: std::ffi::OsString,
    pub kind: EntryKind,
}

impl Beneath {
    /// Opens `root` (a folder that exists); `what` names it in errors ("project", "voice").
    pub fn open(root: &Path, what: &'static str) -> Result<Beneath, BeneathError> {
        let io = |source| BeneathError::Io {
            path: root.to_path_buf(),
            source,
        };
        #[cfg(unix)]
        {
            let dir = sys::open_dir(root).map_err(io)?;
            Ok(Beneath {
                root: root.to_path_buf(),
                what,
                dir,
                #[cfg(target_os = "linux")]
                fast: true,
            })
        }
        #[cfg(not(unix))]
        {
            if !std::fs::metadata(root).map_err(io)?.is_dir() {
                return Err(io(std::io::Error::from(std::io::ErrorKind::NotADirectory)));
            }
            Ok(Beneath {
                root: root.to_path_buf(),
                what,
            })
        }
    }

    /// The folder, as it was opened.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where `relative` is, for showing (nothing is checked).
    pub fn shown(&self, relative: impl AsRef<Path>) -> PathBuf {
        self.root.join(relative)
    }

    fn parts<'a>(&self, relative: &'a Path) -> Result<Parts<'a>, BeneathError> {
        let outside = || BeneathError::NotInside {
            path: relative.to_string_lossy().into_owned(),
            what: self.what,
        };
        let mut names = Vec::new();
        for component in relative.components() {
            match component {
                std::path::Component::Normal(name) => names.push(name),
                _ => return Err(outside()),
            }
        }
        let name = names.pop().ok_or_else(outside)?;
        Ok(Parts {
            folders: names,
            name,
        })
    }

    fn io(&self, relative: &Path) -> impl FnOnce(std::io::Error) -> BeneathError + '_ {
        let path = self.root.join(relative);
        move |source| BeneathError::Io { path, source }
    }

    fn link(&self, parts: &[&std::ffi::OsStr], writing: bool) -> BeneathError {
        let link: PathBuf = parts.iter().collect();
        BeneathError::SymbolicLink {
            link: link.to_string_lossy().into_owned(),
            root: self.root.clone(),
            what: self.what,
            writing,
        }
    }

    /// Makes the folder `relative` and every folder on the way, where missing.
    pub fn create_dir_all(&self, relative: impl AsRef<Path>) -> Result<(), BeneathError> {
        let relative = relative.as_ref();
        let parts = self.parts(relative)?;
        let mut all = parts.folders;
        all.push(parts.name);
        self.folder(&all, true, true).map(drop)
    }

    /// Opens a regular file inside the folder for reading.
    pub fn open_file(&self, relative: impl AsRef<Path>) -> Result<std::fs::File, BeneathError> {
        let relative = relative.as_ref();
        let parts = self.parts(relative)?;
        self.open_in(relative, &parts)
    }

    /// Checks that `relative` is a regular file inside the folder, reached through no link,
    /// and returns its path, for a reader that takes a path (a decoder). What the path names
    /// is checked now, not when it is opened: prefer [`Beneath::open_file`] where a file will do.
    pub fn file_path(&self, relative: impl AsRef<Path>) -> Result<PathBuf, BeneathError> {
        let relative = relative.as_ref();
        self.open_file(relative)?;
        Ok(self.root.join(relative))
    }

    /// Whether `relative` exists (as anything but a link, which is refused).
    pub fn exists(&self, relative: impl AsRef<Path>) -> Result<bool, BeneathError> {
        let relative = relative.as_ref();
        let parts = self.parts(relative)?;
        match self.kind_of(relative, &parts, false) {
            Ok(_) => Ok(true),
            Err(e) if e.is_not_found() => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Writes `bytes` to `relative` atomically (see [`write_atomic`]), making the folders on
    /// the way; returns the file's path. A file that exists keeps its permissions.
    pub fn write_atomic(
        &self,
        relative: impl AsRef<Path>,
        bytes: &[u8],
    ) -> Result<PathBuf, BeneathError> {
        self.copy_atomic_from(relative, &mut &bytes[..])
    }

    /// Writes what `content` reads to `relative` as [`Beneath::write_atomic`] does, in pieces.
    pub fn copy_atomic_from(
        &self,
        relative: impl AsRef<Path>,
        content: &mut dyn std::io::Read,
    ) -> Result<PathBuf, BeneathError> {
        let relative = relative.as_ref();
        let parts = self.parts(relative)?;
        self.write_in(relative, &parts, content)?;
        Ok(self.root.join(relative))
    }

    /// Opens `relative` for writing, creating it (empty) when missing and never truncating it:
    /// for lock files.
    pub fn open_or_create(
        &self,
        relative: impl AsRef<Path>,
    ) -> Result<std::fs::File, BeneathError> {
        let relative = relative.as_ref();
        let parts = self.parts(relative)?;
        self.create_in(relative, &parts)
    }

    /// Removes the regular file `relative`, unlinked from its folder's handle. A link there
    /// (or on the way) is refused by name and left as it is, as is anything but a file.
    pub fn remove_file(&self, relative: impl AsRef<Path>) -> Result<(), BeneathError> {
        let relative = relative.as_ref();
        let parts = self.parts(relative)?;
        self.remove_in(relative, &parts)
    }

    /// The entries of the folder `relative` (the folder itself when empty), sorted by name,
    /// each with its kind told without following it: read from a handle to the folder reached
    /// through no link, so a link swapped in for the folder is never listed through.
    pub fn read_dir(&self, relative: impl AsRef<Path>) -> Result<Vec<Entry>, BeneathError> {
        let relative = relative.as_ref();
        let names = if relative.as_os_str().is_empty() {
            Vec::new()
        } else {
            let parts = self.parts(relative)?;
            Self::all(&parts)
        };
        let mut entries = self.read_dir_in(relative, &names)?;
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(entries)
    }

    /// Creates the file `relative`, which must not exist, for writing (making the folders on
    /// the way): whatever is at the name (a file, a link, a pipe) is an error, never opened.
    pub fn create_new(&self, relative: impl AsRef<Path>) -> Result<std::fs::File, BeneathError> {
        let relative = relative.as_ref();
        let parts = self.parts(relative)?;
        self.create_file_in(relative, &parts, false)
    }

    /// Opens the file `relative` for writing, emptied, creating it when missing (making the
    /// folders on the way). Only a regular file is emptied: a link at the name is refused by
    /// name, anything else (a pipe, a device) is [`BeneathError::NotAFile`].
    pub fn create_truncate(
        &self,
        relative: impl AsRef<Path>,
    ) -> Result<std::fs::File, BeneathError> {
        let relative = relative.as_ref();
        let parts = self.parts(relative)?;
        self.create_file_in(relative, &parts, true)
    }

    /// Opens the regular file `relative`, which exists, for reading and writing in place
    /// (nothing is created or emptied): for repairing a file.
    pub fn open_update(&self, relative: impl AsRef<Path>) -> Result<std::fs::File, BeneathError> {
        let relative = relative.as_ref();
        let parts = self.parts(relative)?;
        self.open_with(relative, &parts, true)
    }

    /// Renames the regular file `from` to `to` (making `to`'s folders), both inside the folder,
    /// replacing a regular file at `to`; a link at either name or on either way is refused by
    /// name. The folder `to` is in is synced, so the rename survives a crash.
    pub fn rename(&self, from: impl AsRef<Path>, to: impl AsRef<Path>) -> Result<(), BeneathError> {
        let (from, to) = (from.as_ref(), to.as_ref());
        let (from_parts, to_parts) = (self.parts(from)?, self.parts(to)?);
        self.rename_in((from, &from_parts), (to, &to_parts))
    }
}

/// Removes the temporary files a [`write_atomic`] killed midway left in the folder `relative`
/// of `folder` (the folder itself when empty), as [`remove_stale_temporaries`] does, but
/// listing and removing only through the folder's handle: nothing behind a link is listed or
/// removed. Returns how many were removed.
pub fn remove_stale_temporaries_beneath(folder: &Beneath, relative: impl AsRef<Path>) -> usize {
    let relative = relative.as_ref();
    let Ok(entries) = folder.read_dir(relative) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries {
        if entry.kind != EntryKind::File {
            continue;
        }
        let Some(pid) = entry.name.to_str().and_then(temporary_owner) else {
            continue;
        };
        if process_alive(pid) {
            continue;
        }
        match folder.remove_file(relative.join(&entry.name)) {
            Ok(()) => removed += 1,
            Err(e) if e.is_not_found() => {}
            Err(e) => tracing::warn!(error = %e, "a stale temporary file stays"),
        }
    }
    removed
}

#[cfg(unix)]
impl Beneath {
    /// The folder `names` under the root, as an open handle; made on the way when `create`.
    fn folder(
        &self,
        names: &[&std::ffi::OsStr],
        create: bool,
        writing: bool,
    ) -> Result<std::os::fd::OwnedFd, BeneathError> {
        let shown: PathBuf = names.iter().collect();
        let io = self.io(&shown);
        if names.is_empty() {
            return self.dir.try_clone().map_err(io);
        }
        #[cfg(target_os = "linux")]
        if self.fast {
            // The whole path in one call; any failure is explained by the walk below.
            if let Some(fd) =
                sys::open_beneath(&self.dir, &shown, libc::O_RDONLY | libc::O_DIRECTORY)
            {
                return Ok(fd);
            }
        }
        let mut current = self.dir.try_clone().map_err(self.io(&shown))?;
        for (i, name) in names.iter().enumerate() {
            let c_name = sys::c_name(name).map_err(self.io(&shown))?;
            let mut opened = sys::open_at(&current, &c_name, libc::O_RDONLY | libc::O_DIRECTORY, 0);
            if create && matches!(&opened, Err(e) if e.kind() == std::io::ErrorKind::NotFound) {
                match sys::mkdir_at(&current, &c_name) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                    Err(e) => return Err(self.io(&names[..=i].iter().collect::<PathBuf>())(e)),
                }
                opened = sys::open_at(&current, &c_name, libc::O_RDONLY | libc::O_DIRECTORY, 0);
            }
            current = match opened {
                Ok(fd) => fd,
                Err(e) => return Err(self.explain(&current, &names[..=i], e, writing)),
            };
        }
        Ok(current)
    }

    /// Names the link when `error` came from one at `names`' last part, else the error itself.
    fn explain(
        &self,
        parent: &std::os::fd::OwnedFd,
        names: &[&std::ffi::OsStr],
        error: std::io::Error,
        writing: bool,
    ) -> BeneathError {
        let last = names.last().expect("a name");
        let is_link = sys::c_name(last)
            .and_then(|c| sys::mode_at(parent, &c))
            .is_ok_and(|mode| mode & libc::S_IFMT == libc::S_IFLNK);
        if is_link {
            self.link(names, writing)
        } else {
            self.io(&names.iter().collect::<PathBuf>())(error)
        }
    }

    fn all<'a>(parts: &Parts<'a>) -> Vec<&'a std::ffi::OsStr> {
        let mut all = parts.folders.clone();
        all.push(parts.name);
        all
    }

    fn open_in(&self, relative: &Path, parts: &Parts<'_>) -> Result<std::fs::File, BeneathError> {
        self.open_with(relative, parts, false)
    }

    /// Opens an existing regular file for reading, and for writing too when `write`.
    fn open_with(
        &self,
        relative: &Path,
        parts: &Parts<'_>,
        write: bool,
    ) -> Result<std::fs::File, BeneathError> {
        // Non-blocking, so a pipe put where a file was expected cannot hang the open.
        let access = if write { libc::O_RDWR } else { libc::O_RDONLY };
        let flags = access | libc::O_NONBLOCK;
        #[cfg(target_os = "linux")]
        let fast = self
            .fast
            .then(|| sys::open_beneath(&self.dir, relative, flags))
            .flatten();
        #[cfg(not(target_os = "linux"))]
        let fast: Option<std::os::fd::OwnedFd> = None;
        let fd = match fast {
            Some(fd) => fd,
            None => {
                let dir = self.folder(&parts.folders, false, false)?;
                let name = sys::c_name(parts.name).map_err(self.io(relative))?;
                sys::open_at(&dir, &name, flags, 0)
                    .map_err(|e| self.explain(&dir, &Self::all(parts), e, write))?
            }
        };
        let file = std::fs::File::from(fd);
        let meta = file.metadata().map_err(self.io(relative))?;
        if !meta.is_file() {
            return Err(BeneathError::NotAFile {
                path: self.root.join(relative),
            });
        }
        sys::set_blocking(&file).map_err(self.io(relative))?;
        Ok(file)
    }

    /// The file type bits of `relative` (not following a link: a link is refused).
    fn kind_of(
        &self,
        relative: &Path,
        parts: &Parts<'_>,
        writing: bool,
    ) -> Result<libc::mode_t, BeneathError> {
        let dir = self.folder(&parts.folders, false, writing)?;
        self.kind_in(&dir, relative, parts, writing)
    }

    fn kind_in(
        &self,
        dir: &std::os::fd::OwnedFd,
        relative: &Path,
        parts: &Parts<'_>,
        writing: bool,
    ) -> Result<libc::mode_t, BeneathError> {
        let name = sys::c_name(parts.name).map_err(self.io(relative))?;
        let mode = sys::mode_at(dir, &name).map_err(self.io(relative))?;
        if mode & libc::S_IFMT == libc::S_IFLNK {
            return Err(self.link(&Self::all(parts), writing));
        }
        Ok(mode)
    }

    fn write_in(
        &self,
        relative: &Path,
        parts: &Parts<'_>,
        content: &mut dyn std::io::Read,
    ) -> Result<(), BeneathError> {
        use std::os::unix::fs::PermissionsExt;
        let dir = self.folder(&parts.folders, true, true)?;
        let kept = match self.kind_in(&dir, relative, parts, true) {
            Ok(mode) => Some(mode & 0o7777),
            Err(e) if e.is_not_found() => None,
            Err(e) => return Err(e),
        };
        let name = sys::c_name(parts.name).map_err(self.io(relative))?;
        let tmp = std::ffi::CString::new(temporary_name(&parts.name.to_string_lossy()))
            .expect("a name without NUL");
        let io = self.io(relative);
        let result = (|| {
            let fd = sys::open_at(
                &dir,
                &tmp,
                libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL,
                kept.unwrap_or(0o666),
            )?;
            let mut file = std::fs::File::from(fd);
            if let Some(mode) = kept {
                // mode_t is u16 on macOS.
                #[allow(clippy::unnecessary_cast)]
                file.set_permissions(std::fs::Permissions::from_mode(mode as u32))?;
            }
            std::io::copy(content, &mut file)?;
            file.sync_all()?;
            sys::rename_at(&dir, &tmp, &dir, &name)?;
            std::fs::File::from(dir.try_clone()?).sync_all()
        })();
        if result.is_err() {
            let _ = sys::unlink_at(&dir, &tmp);
        }
        result.map_err(io)
    }

    fn create_in(&self, relative: &Path, parts: &Parts<'_>) -> Result<std::fs::File, BeneathError> {
        let dir = self.folder(&parts.folders, true, true)?;
        let name = sys::c_name(parts.name).map_err(self.io(relative))?;
        let fd = sys::open_at(&dir, &name, libc::O_WRONLY | libc::O_CREAT, 0o666)
            .map_err(|e| self.explain(&dir, &Self::all(parts), e, true))?;
        Ok(std::fs::File::from(fd))
    }

    /// Refuses what is at `relative` in `dir` unless it is a regular file (a link by name);
    /// `Ok(false)` when nothing is there and `missing_ok`.
    fn regular_in(
        &self,
        dir: &std::os::fd::OwnedFd,
        relative: &Path,
        parts: &Parts<'_>,
        missing_ok: bool,
    ) -> Result<bool, BeneathError> {
        match self.kind_in(dir, relative, parts, true) {
            Ok(mode) if mode & libc::S_IFMT == libc::S_IFREG => Ok(true),
            Ok(_) => Err(BeneathError::NotAFile {
                path: self.root.join(relative),
            }),
            Err(e) if missing_ok && e.is_not_found() => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn remove_in(&self, relative: &Path, parts: &Parts<'_>) -> Result<(), BeneathError> {
        let dir = self.folder(&parts.folders, false, true)?;
        // Checked, then unlinked from the same handle: whatever is swapped in meanwhile, only
        // a name in this folder goes, and nothing a link points to.
        self.regular_in(&dir, relative, parts, false)?;
        let name = sys::c_name(parts.name).map_err(self.io(relative))?;
        sys::unlink_at(&dir, &name).map_err(self.io(relative))
    }

    fn read_dir_in(
        &self,
        relative: &Path,
        names: &[&std::ffi::OsStr],
    ) -> Result<Vec<Entry>, BeneathError> {
        let dir = self.folder(names, false, false)?;
        // A description of its own: one shared with the folder's handle would share its place.
        let listed = sys::open_at(&dir, c".", libc::O_RDONLY | libc::O_DIRECTORY, 0)
            .and_then(sys::list)
            .map_err(self.io(relative))?;
        let mut entries = Vec::with_capacity(listed.len());
        for name in listed {
            let c_name = sys::c_name(&name).map_err(self.io(relative))?;
            let mode = match sys::mode_at(&dir, &c_name) {
                Ok(mode) => mode,
                // Removed since it was listed.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(self.io(&relative.join(&name))(e)),
            };
            let kind = match mode & libc::S_IFMT {
                libc::S_IFREG => EntryKind::File,
                libc::S_IFDIR => EntryKind::Folder,
                libc::S_IFLNK => EntryKind::Link,
                _ => EntryKind::Other,
            };
            entries.push(Entry { name, kind });
        }
        Ok(entries)
    }

    fn create_file_in(
        &self,
        relative: &Path,
        parts: &Parts<'_>,
        truncate: bool,
    ) -> Result<std::fs::File, BeneathError> {
        let dir = self.folder(&parts.folders, true, true)?;
        let name = sys::c_name(parts.name).map_err(self.io(relative))?;
        let not_a_file = || BeneathError::NotAFile {
            path: self.root.join(relative),
        };
        if !truncate {
            // O_EXCL: whatever is at the name, a link included, fails the open.
            let fd = sys::open_at(
                &dir,
                &name,
                libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL,
                0o666,
            )
            .map_err(|e| self.explain(&dir, &Self::all(parts), e, true))?;
            return Ok(std::fs::File::from(fd));
        }
        self.regular_in(&dir, relative, parts, true)?;
        // Not O_TRUNC: emptied only once the open file is known to be a regular one (a device
        // swapped in meanwhile is left alone); non-blocking, so a pipe cannot hang the open.
        let fd = sys::open_at(
            &dir,
            &name,
            libc::O_WRONLY | libc::O_CREAT | libc::O_NONBLOCK,
            0o666,
        )
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ENXIO) => not_a_file(),
            _ => self.explain(&dir, &Self::all(parts), e, true),
        })?;
        let file = std::fs::File::from(fd);
        if !file.metadata().map_err(self.io(relative))?.is_file() {
            return Err(not_a_file());
        }
        file.set_len(0).map_err(self.io(relative))?;
        sys::set_blocking(&file).map_err(self.io(relative))?;
        Ok(file)
    }

    fn rename_in(
        &self,
        (from, from_parts): (&Path, &Parts<'_>),
        (to, to_parts): (&Path, &Parts<'_>),
    ) -> Result<(), BeneathError> {
        let from_dir = self.folder(&from_parts.folders, false, true)?;
        self.regular_in(&from_dir, from, from_parts, false)?;
        let to_dir = self.folder(&to_parts.folders, true, true)?;
        self.regular_in(&to_dir, to, to_parts, true)?;
        let from_name = sys::c_name(from_parts.name).map_err(self.io(from))?;
        let to_name = sys::c_name(to_parts.name).map_err(self.io(to))?;
        sys::rename_at(&from_dir, &from_name, &to_dir, &to_name).map_err(self.io(to))?;
        std::fs::File::from(to_dir.try_clone().map_err(self.io(to))?)
            .sync_all()
            .map_err(self.io(to))
    }

    /// Turns the fast path off, so the walk runs (for tests).
    #[cfg(all(test, target_os = "linux"))]
    fn walking(mut self) -> Self {
        self.fast = false;
        self
    }
}

/// The system calls [`Beneath`] makes, each relative to an open folder and never following a
/// link (`O_NOFOLLOW`, `AT_SYMLINK_NOFOLLOW`, `RESOLVE_NO_SYMLINKS`).
#[cfg(unix)]
mod sys {
    use std::ffi::{CStr, CString, OsStr};
    use std::io;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;
    use std::path::Path;

    pub fn c_name(name: &OsStr) -> io::Result<CString> {
        CString::new(name.as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
    }

    fn fd_or_error(fd: libc::c_int) -> io::Result<OwnedFd> {
        if fd < 0 {
            Err(io::Error::last_os_error())
        } else {
            // SAFETY: the call just returned this descriptor, owned by no one else.
            Ok(unsafe { OwnedFd::from_raw_fd(fd) })
        }
    }

    fn ok_or_error(rc: libc::c_int) -> io::Result<()> {
        if rc < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    /// Opens a folder by its path (following links: the root is the user's choice).
    pub fn open_dir(path: &Path) -> io::Result<OwnedFd> {
        let c = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: a valid NUL-terminated path.
        fd_or_error(unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        })
    }

    /// `openat(dir, name, flags | O_NOFOLLOW | O_CLOEXEC, mode)`: one plain name, never a link.
    pub fn open_at(
        dir: &OwnedFd,
        name: &CStr,
        flags: libc::c_int,
        mode: libc::mode_t,
    ) -> io::Result<OwnedFd> {
        // SAFETY: a live descriptor and a valid NUL-terminated name.
        fd_or_error(unsafe {
            libc::openat(
                dir.as_raw_fd(),
                name.as_ptr(),
                flags | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                mode as libc::c_uint,
            )
        })
    }

    /// `openat2(dir, path, { flags, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS })`, or `None` when it
    /// fails for any reason (missing, refused by a sandbox, a link on the way, not found): the
    /// walk then does the work, and says exactly what is wrong.
    #[cfg(target_os = "linux")]
    pub fn open_beneath(dir: &OwnedFd, path: &Path, flags: libc::c_int) -> Option<OwnedFd> {
        use std::sync::atomic::{AtomicBool, Ordering};
        static MISSING: AtomicBool = AtomicBool::new(false);
        if MISSING.load(Ordering::Relaxed) {
            return None;
        }
        let c = CString::new(path.as_os_str().as_bytes()).ok()?;
        // SAFETY: open_how is plain data; all-zero is its documented default.
        let mut how: libc::open_how = unsafe { std::mem::zeroed() };
        how.flags = (flags | libc::O_NOFOLLOW | libc::O_CLOEXEC) as u64;
        how.resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS;
        // SAFETY: a live descriptor, a valid path, and `how` with its true size.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                dir.as_raw_fd(),
                c.as_ptr(),
                &how as *const libc::open_how,
                std::mem::size_of::<libc::open_how>(),
            )
        };
        if fd < 0 {
            let e = io::Error::last_os_error().raw_os_error();
            if matches!(e, Some(libc::ENOSYS) | Some(libc::EPERM)) {
                MISSING.store(true, Ordering::Relaxed);
            }
            return None;
        }
        fd_or_error(fd as libc::c_int).ok()
    }

    pub fn mkdir_at(dir: &OwnedFd, name: &CStr) -> io::Result<()> {
        // SAFETY: a live descriptor and a valid name.
        ok_or_error(unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), 0o777) })
    }

    /// The mode of `name` in `dir`, of a link itself when it is one.
    pub fn mode_at(dir: &OwnedFd, name: &CStr) -> io::Result<libc::mode_t> {
        // SAFETY: stat is plain data, filled by the call.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: a live descriptor, a valid name, a stat to fill.
        ok_or_error(unsafe {
            libc::fstatat(
                dir.as_raw_fd(),
                name.as_ptr(),
                &mut st,
                libc::AT_SYMLINK_NOFOLLOW,
            )
        })?;
        Ok(st.st_mode)
    }

    /// Renames `from` in `from_dir` to `to` in `to_dir` (neither name is followed if a link).
    pub fn rename_at(
        from_dir: &OwnedFd,
        from: &CStr,
        to_dir: &OwnedFd,
        to: &CStr,
    ) -> io::Result<()> {
        // SAFETY: live descriptors and valid names.
        ok_or_error(unsafe {
            libc::renameat(
                from_dir.as_raw_fd(),
                from.as_ptr(),
                to_dir.as_raw_fd(),
                to.as_ptr(),
            )
        })
    }

    /// The names in the open folder `dir` (`fdopendir`, which takes the descriptor), without
    /// `.` and `..`.
    pub fn list(dir: OwnedFd) -> io::Result<Vec<std::ffi::OsString>> {
        use std::os::fd::IntoRawFd;
        struct Stream(*mut libc::DIR);
        impl Drop for Stream {
            fn drop(&mut self) {
                // SAFETY: a stream fdopendir returned, closed once (with its descriptor).
                unsafe { libc::closedir(self.0) };
            }
        }
        let raw = dir.into_raw_fd();
        // SAFETY: a descriptor this function owns; on success the stream owns it.
        let stream = unsafe { libc::fdopendir(raw) };
        if stream.is_null() {
            let e = io::Error::last_os_error();
            // SAFETY: fdopendir failed, so the descriptor is still ours to close.
            unsafe { libc::close(raw) };
            return Err(e);
        }
        let stream = Stream(stream);
        let mut names = Vec::new();
        loop {
            clear_errno();
            // SAFETY: a live stream, read by this thread only.
            let entry = unsafe { libc::readdir(stream.0) };
            if entry.is_null() {
                let error = io::Error::last_os_error();
                return match error.raw_os_error() {
                    Some(code) if ERRNO_CLEARED && code != 0 => Err(error),
                    _ => Ok(names),
                };
            }
            // SAFETY: readdir returned an entry whose name is NUL-terminated, valid until the
            // next readdir on this stream; it is copied before that.
            let name = unsafe { CStr::from_ptr((*entry).d_name.as_ptr()) }.to_bytes();
            if name != b"." && name != b".." {
                names.push(OsStr::from_bytes(name).to_os_string());
            }
        }
    }

    /// Whether [`clear_errno`] can clear errno here, so that a failing `readdir` is told
    /// from the end of the folder (elsewhere the end is assumed).
    const ERRNO_CLEARED: bool = cfg!(any(
        target_os = "linux",
        target_os = "android",
        target_os = "macos",
        target_os = "ios",
        target_os = "freebsd"
    ));

    fn clear_errno() {
        // SAFETY: the calling thread's errno, set to 0 as readdir(3) asks of its callers.
        #[cfg(target_os = "linux")]
        unsafe {
            *libc::__errno_location() = 0
        };
        #[cfg(target_os = "android")]
        unsafe {
            *libc::__errno() = 0
        };
        #[cfg(any(target_os = "macos", target_os = "ios", target_os = "freebsd"))]
        unsafe {
            *libc::__error() = 0
        };
    }

    pub fn unlink_at(dir: &OwnedFd, name: &CStr) -> io::Result<()> {
        // SAFETY: a live descriptor and a valid name.
        ok_or_error(unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), 0) })
    }

    pub use crate::input::set_blocking;
}

/// Elsewhere: each part is checked (not a link) before the path is used.
#[cfg(not(unix))]
impl Beneath {
    fn checked_walk(
        &self,
        names: &[&std::ffi::OsStr],
        create: bool,
        writing: bool,
    ) -> Result<PathBuf, BeneathError> {
        let mut path = self.root.clone();
        for (i, name) in names.iter().enumerate() {
            path.push(name);
            match std::fs::symlink_metadata(&path) {
                Ok(m) if m.file_type().is_symlink() => return Err(self.link(&names[..=i], writing)),
                Ok(_) => {}
                Err(e) if create && e.kind() == std::io::ErrorKind::NotFound => {
                    std::fs::create_dir(&path).map_err(|source| BeneathError::Io {
                        path: path.clone(),
                        source,
                    })?
                }
                Err(source) => return Err(BeneathError::Io { path, source }),
            }
        }
        Ok(path)
    }

    fn folder(
        &self,
        names: &[&std::ffi::OsStr],
        create: bool,
        writing: bool,
    ) -> Result<PathBuf, BeneathError> {
        self.checked_walk(names, create, writing)
    }

    fn all<'a>(parts: &Parts<'a>) -> Vec<&'a std::ffi::OsStr> {
        let mut all = parts.folders.clone();
        all.push(parts.name);
        all
    }

    fn open_in(&self, relative: &Path, parts: &Parts<'_>) -> Result<std::fs::File, BeneathError> {
        let path = self.checked_walk(&Self::all(parts), false, false)?;
        if !std::fs::metadata(&path)
            .map_err(self.io(relative))?
            .is_file()
        {
            return Err(BeneathError::NotAFile { path });
        }
        std::fs::File::open(&path).map_err(self.io(relative))
    }

    fn kind_of(
        &self,
        _relative: &Path,
        parts: &Parts<'_>,
        writing: bool,
    ) -> Result<(), BeneathError> {
        self.checked_walk(&Self::all(parts), false, writing)
            .map(drop)
    }

    fn write_in(
        &self,
        relative: &Path,
        parts: &Parts<'_>,
        content: &mut dyn std::io::Read,
    ) -> Result<(), BeneathError> {
        self.folder(&parts.folders, true, true)?;
        match self.kind_of(relative, parts, true) {
            Ok(()) => {}
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e),
        }
        copy_atomic_from(content, &self.root.join(relative)).map_err(self.io(relative))
    }

    fn create_in(&self, relative: &Path, parts: &Parts<'_>) -> Result<std::fs::File, BeneathError> {
        self.folder(&parts.folders, true, true)?;
        match self.kind_of(relative, parts, true) {
            Ok(()) => {}
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e),
        }
        std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(self.root.join(relative))
            .map_err(self.io(relative))
    }

    /// Refuses what is at `relative` unless it is a regular file (a link by name); `Ok(false)`
    /// when nothing is there and `missing_ok`.
    fn regular_at(
        &self,
        relative: &Path,
        parts: &Parts<'_>,
        missing_ok: bool,
    ) -> Result<bool, BeneathError> {
        let path = match self.checked_walk(&Self::all(parts), false, true) {
            Ok(path) => path,
            Err(e) if missing_ok && e.is_not_found() => return Ok(false),
            Err(e) => return Err(e),
        };
        if std::fs::symlink_metadata(&path)
            .map_err(self.io(relative))?
            .is_file()
        {
            Ok(true)
        } else {
            Err(BeneathError::NotAFile { path })
        }
    }

    fn open_with(
        &self,
        relative: &Path,
        parts: &Parts<'_>,
        write: bool,
    ) -> Result<std::fs::File, BeneathError> {
        self.regular_at(relative, parts, false)?;
        std::fs::OpenOptions::new()
            .read(true)
            .write(write)
            .open(self.root.join(relative))
            .map_err(self.io(relative))
    }

    fn remove_in(&self, relative: &Path, parts: &Parts<'_>) -> Result<(), BeneathError> {
        self.folder(&parts.folders, false, true)?;
        self.regular_at(relative, parts, false)?;
        std::fs::remove_file(self.root.join(relative)).map_err(self.io(relative))
    }

    fn read_dir_in(
        &self,
        relative: &Path,
        names: &[&std::ffi::OsStr],
    ) -> Result<Vec<Entry>, BeneathError> {
        let path = self.checked_walk(names, false, false)?;
        let mut entries = Vec::new();
        for entry in std::fs::read_dir(&path).map_err(self.io(relative))? {
            let entry = entry.map_err(self.io(relative))?;
            // The entry's own type: a link is not followed to tell.
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let kind = if kind.is_symlink() {
                EntryKind::Link
            } else if kind.is_file() {
                EntryKind::File
            } else if kind.is_dir() {
                EntryKind::Folder
            } else {
                EntryKind::Other
            };
            entries.push(Entry {
                name: entry.file_name(),
                kind,
            });
        }
        Ok(entries)
    }

    fn create_file_in(
        &self,
        relative: &Path,
        parts: &Parts<'_>,
        truncate: bool,
    ) -> Result<std::fs::File, BeneathError> {
        self.folder(&parts.folders, true, true)?;
        let mut options = std::fs::OpenOptions::new();
        options.write(true);
        if truncate {
            self.regular_at(relative, parts, true)?;
            options.create(true).truncate(false);
        } else {
            options.create_new(true);
        }
        let file = options
            .open(self.root.join(relative))
            .map_err(self.io(relative))?;
        if truncate {
            if !file.metadata().map_err(self.io(relative))?.is_file() {
                return Err(BeneathError::NotAFile {
                    path: self.root.join(relative),
                });
            }
            file.set_len(0).map_err(self.io(relative))?;
        }
        Ok(file)
    }

    fn rename_in(
        &self,
        (from, from_parts): (&Path, &Parts<'_>),
        (to, to_parts): (&Path, &Parts<'_>),
    ) -> Result<(), BeneathError> {
        self.regular_at(from, from_parts, false)?;
        self.folder(&to_parts.folders, true, true)?;
        self.regular_at(to, to_parts, true)?;
        std::fs::rename(self.root.join(from), self.root.join(to)).map_err(self.io(to))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// Distinguishes the scratch folders of tests in one process.
    static NEXT_SCRATCH: AtomicU64 = AtomicU64::new(0);

    #[cfg(unix)]
    fn beneath_scratch(name: &str) -> (PathBuf, PathBuf, PathBuf) {
        let base = std::env::temp_dir().join(format!(
            "headroom-beneath-{name}-{}-{}",
            std::process::id(),
            NEXT_SCRATCH.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&base);
        let root = base.join("project");
        let outside = base.join("outside");
        std::fs::create_dir_all(root.join("speech")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        (base, root, outside)
    }

    /// Both ways of resolving: `openat2` where the kernel has it, and the walk.
    #[cfg(unix)]
    fn both_ways(root: &Path) -> Vec<Beneath> {
        let fast = Beneath::open(root, "project").unwrap();
        #[cfg(target_os = "linux")]
        return vec![fast, Beneath::open(root, "project").unwrap().walking()];
        #[cfg(not(target_os = "linux"))]
        vec![fast]
    }

    #[cfg(unix)]
    #[test]
    fn beneath_writes_reads_and_removes_inside_the_folder() {
        use std::os::unix::fs::PermissionsExt;
        let (base, root, _) = beneath_scratch("plain");
        for b in both_ways(&root) {
            let path = b.write_atomic("exports/deep/a.srt", b"one").unwrap();
            assert_eq!(path, root.join("exports/deep/a.srt"));
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
            b.write_atomic("exports/deep/a.srt", b"two").unwrap();
            assert_eq!(
                std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
                0o640
            );
            let mut read = String::new();
            std::io::Read::read_to_string(
                &mut b.open_file("exports/deep/a.srt").unwrap(),
                &mut read,
            )
            .unwrap();
            assert_eq!(read, "two");
            assert_eq!(b.file_path("exports/deep/a.srt").unwrap(), path);
            assert!(b.exists("exports/deep").unwrap());
            assert!(!b.exists("exports/none.txt").unwrap());
            assert!(!b.exists("missing/none.txt").unwrap());
            assert_eq!(
                std::fs::read_dir(root.join("exports/deep"))
                    .unwrap()
                    .count(),
                1,
                "no temporary left"
            );
            b.remove_file("exports/deep/a.srt").unwrap();
            assert!(!path.exists());
            assert!(b
                .open_file("exports/deep/a.srt")
                .unwrap_err()
                .is_not_found());
            b.create_dir_all("speech/narration").unwrap();
            assert!(root.join("speech/narration").is_dir());
            let lock = b.open_or_create("jobs/1.lock").unwrap();
            drop(lock);
            assert!(root.join("jobs/1.lock").is_file());
            for bad in [
                "../escape.txt",
                "/tmp/abs.txt",
                "",
                "exports/../../x",
                "./a",
            ] {
                assert!(
                    matches!(
                        b.write_atomic(bad, b"x"),
                        Err(BeneathError::NotInside { .. })
                    ),
                    "{bad}"
                );
            }
            assert!(matches!(
                b.open_file("exports/deep"),
                Err(BeneathError::NotAFile { .. })
            ));
            std::fs::remove_dir_all(root.join("exports")).unwrap();
        }
        std::fs::remove_dir_all(base).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn beneath_refuses_every_symbolic_link_and_names_it() {
        use std::os::unix::fs::symlink;
        let (base, root, outside) = beneath_scratch("links");
        std::fs::write(outside.join("victim.txt"), b"keep").unwrap();
        symlink(&outside, root.join("exports")).unwrap();
        symlink(&outside, root.join("speech").join("narration")).unwrap();
        symlink(outside.join("victim.txt"), root.join("project.json")).unwrap();
        // Even a link that points back inside is refused: no link is followed at all.
        symlink(root.join("speech"), root.join("alias")).unwrap();
        for b in both_ways(&root) {
            let refused = |result: Result<PathBuf, BeneathError>, link: &str| match result {
                Err(e @ BeneathError::SymbolicLink { .. }) => {
                    let message = e.to_string();
                    assert!(
                        message.starts_with(&format!(
                            "{link} is a symbolic link; Headroom writes only inside the project folder"
                        )),
                        "{message}"
                    );
                }
                other => panic!("{link}: {other:?}"),
            };
            refused(b.write_atomic("exports/talk.srt", b"x"), "exports");
            refused(b.write_atomic("exports/new/talk.srt", b"x"), "exports");
            refused(
                b.write_atomic("speech/narration/s-1.wav", b"x"),
                "speech/narration",
            );
            refused(b.write_atomic("project.json", b"x"), "project.json");
            refused(b.write_atomic("alias/a.wav", b"x"), "alias");
            refused(b.copy_atomic_from("exports/a", &mut &b"x"[..]), "exports");
            assert!(matches!(
                b.open_or_create("exports/a.lock"),
                Err(BeneathError::SymbolicLink { .. })
            ));
            assert!(matches!(
                b.create_dir_all("exports/sub"),
                Err(BeneathError::SymbolicLink { .. })
            ));
            match b.open_file("project.json") {
                Err(e @ BeneathError::SymbolicLink { .. }) => assert!(
                    e.to_string()
                        .contains("Headroom reads only inside the project folder"),
                    "{e}"
                ),
                other => panic!("{other:?}"),
            }
            assert!(matches!(
                b.file_path("exports/victim.txt"),
                Err(BeneathError::SymbolicLink { .. })
            ));
            assert!(matches!(
                b.exists("exports/victim.txt"),
                Err(BeneathError::SymbolicLink { .. })
            ));
        }
        let left: Vec<_> = std::fs::read_dir(&outside)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, ["victim.txt"], "nothing was written outside");
        assert_eq!(std::fs::read(outside.join("victim.txt")).unwrap(), b"keep");
        std::fs::remove_dir_all(base).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn beneath_refuses_a_pipe_without_waiting_for_a_writer() {
        let (base, root, _) = beneath_scratch("fifo");
        let fifo = std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(
            root.join("speech/take.wav").as_os_str(),
        ))
        .unwrap();
        // SAFETY: a valid path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        for b in both_ways(&root) {
            assert!(matches!(
                b.open_file("speech/take.wav"),
                Err(BeneathError::NotAFile { .. })
            ));
        }
        std::fs::remove_dir_all(base).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn beneath_lists_creates_updates_renames_and_removes_plain_files() {
        use std::io::{Read, Seek, Write};
        let (base, root, _) = beneath_scratch("files");
        for b in both_ways(&root) {
            let mut new = b.create_new("takes/a.wav").unwrap();
            new.write_all(b"first").unwrap();
            drop(new);
            assert!(matches!(
                b.create_new("takes/a.wav"),
                Err(BeneathError::Io { source, .. }) if source.kind() == std::io::ErrorKind::AlreadyExists
            ));
            let mut again = b.create_truncate("takes/a.wav").unwrap();
            again.write_all(b"two").unwrap();
            drop(again);
            assert_eq!(std::fs::read(root.join("takes/a.wav")).unwrap(), b"two");
            b.create_truncate("takes/b.wav").unwrap();
            std::fs::create_dir(root.join("takes/sub")).unwrap();
            let mut update = b.open_update("takes/a.wav").unwrap();
            let mut read = String::new();
            update.read_to_string(&mut read).unwrap();
            assert_eq!(read, "two");
            update.seek(std::io::SeekFrom::Start(0)).unwrap();
            update.write_all(b"T").unwrap();
            drop(update);
            assert_eq!(std::fs::read(root.join("takes/a.wav")).unwrap(), b"Two");
            assert!(b.open_update("takes/none.wav").unwrap_err().is_not_found());
            let listed = b.read_dir("takes").unwrap();
            let file = |name: &str| Entry {
                name: name.into(),
                kind: EntryKind::File,
            };
            assert_eq!(
                listed,
                [
                    file("a.wav"),
                    file("b.wav"),
                    Entry {
                        name: "sub".into(),
                        kind: EntryKind::Folder
                    }
                ]
            );
            assert!(b
                .read_dir("")
                .unwrap()
                .iter()
                .any(|e| e.name == "takes" && e.kind == EntryKind::Folder));
            assert!(b.read_dir("missing").unwrap_err().is_not_found());
            b.rename("takes/a.wav", "kept/a.wav").unwrap();
            assert_eq!(std::fs::read(root.join("kept/a.wav")).unwrap(), b"Two");
            b.rename("takes/b.wav", "kept/a.wav").unwrap();
            assert_eq!(std::fs::read(root.join("kept/a.wav")).unwrap(), b"");
            b.remove_file("kept/a.wav").unwrap();
            assert!(b.remove_file("kept/a.wav").unwrap_err().is_not_found());
            assert!(matches!(
                b.remove_file("takes/sub"),
                Err(BeneathError::NotAFile { .. })
            ));
            assert!(b.read_dir("kept").unwrap().is_empty());
            std::fs::remove_dir_all(root.join("takes")).unwrap();
            std::fs::remove_dir_all(root.join("kept")).unwrap();
        }
        std::fs::remove_dir_all(base).unwrap();
    }

    /// Every one of `read_dir`, `remove_file`, `create_new`, `create_truncate`, `open_update`
    /// and `rename` refuses a link as a folder on the way and as the last name (even one
    /// pointing back inside), and `..`: nothing outside is listed, opened, emptied or removed.
    #[cfg(unix)]
    #[test]
    fn beneath_lists_writes_renames_and_removes_through_no_link_and_no_dot_dot() {
        use std::os::unix::fs::symlink;
        let (base, root, outside) = beneath_scratch("new-links");
        std::fs::write(outside.join("victim.wav"), b"keep").unwrap();
        std::fs::write(root.join("speech/mine.wav"), b"mine").unwrap();
        symlink(&outside, root.join("takes")).unwrap();
        symlink(outside.join("victim.wav"), root.join("speech/linked.wav")).unwrap();
        symlink(root.join("speech"), root.join("alias")).unwrap();
        let is_link = |e: BeneathError, what: &str| {
            assert!(
                matches!(e, BeneathError::SymbolicLink { .. }),
                "{what}: {e:?}"
            );
        };
        let is_outside = |e: BeneathError, what: &str| {
            assert!(matches!(e, BeneathError::NotInside { .. }), "{what}: {e:?}");
        };
        for b in both_ways(&root) {
            for folder in ["takes", "alias"] {
                is_link(b.read_dir(folder).unwrap_err(), folder);
                let file = format!("{folder}/victim.wav");
                is_link(b.remove_file(&file).unwrap_err(), &file);
                is_link(
                    b.create_new(format!("{folder}/new.wav")).unwrap_err(),
                    &file,
                );
                is_link(b.create_truncate(&file).unwrap_err(), &file);
                is_link(b.open_update(&file).unwrap_err(), &file);
                is_link(b.rename(&file, "speech/got.wav").unwrap_err(), &file);
                is_link(b.rename("speech/mine.wav", &file).unwrap_err(), &file);
            }
            let last = "speech/linked.wav";
            is_link(b.remove_file(last).unwrap_err(), last);
            is_link(b.create_new(last).unwrap_err(), last);
            is_link(b.create_truncate(last).unwrap_err(), last);
            is_link(b.open_update(last).unwrap_err(), last);
            is_link(b.rename(last, "speech/got.wav").unwrap_err(), last);
            is_link(b.rename("speech/mine.wav", last).unwrap_err(), last);
            for dots in ["../outside", "speech/../../outside", "/tmp"] {
                is_outside(b.read_dir(dots).unwrap_err(), dots);
                let file = format!("{dots}/victim.wav");
                is_outside(b.remove_file(&file).unwrap_err(), &file);
                is_outside(b.create_new(&file).unwrap_err(), &file);
                is_outside(b.create_truncate(&file).unwrap_err(), &file);
                is_outside(b.open_update(&file).unwrap_err(), &file);
                is_outside(b.rename(&file, "speech/got.wav").unwrap_err(), &file);
                is_outside(b.rename("speech/mine.wav", &file).unwrap_err(), &file);
            }
            // The links are listed as links, never followed.
            let speech = b.read_dir("speech").unwrap();
            assert!(speech
                .iter()
                .any(|e| e.name == "linked.wav" && e.kind == EntryKind::Link));
        }
        let left: Vec<_> = std::fs::read_dir(&outside)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, ["victim.wav"], "nothing was made outside");
        assert_eq!(std::fs::read(outside.join("victim.wav")).unwrap(), b"keep");
        assert!(
            root.join("speech/linked.wav").is_symlink(),
            "the link stays"
        );
        assert_eq!(
            std::fs::read(root.join("speech/mine.wav")).unwrap(),
            b"mine"
        );
        std::fs::remove_dir_all(base).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn beneath_refuses_to_empty_a_pipe_without_waiting_for_a_reader() {
        let (base, root, _) = beneath_scratch("fifo-write");
        let fifo = std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(
            root.join("speech/take.wav").as_os_str(),
        ))
        .unwrap();
        // SAFETY: a valid path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        for b in both_ways(&root) {
            for result in [
                b.create_truncate("speech/take.wav"),
                b.open_update("speech/take.wav"),
            ] {
                assert!(matches!(result, Err(BeneathError::NotAFile { .. })));
            }
            assert!(matches!(
                b.remove_file("speech/take.wav"),
                Err(BeneathError::NotAFile { .. })
            ));
        }
        std::fs::remove_dir_all(base).unwrap();
    }

    /// Crash recovery's clean-up lists and removes only through the folder's handle: a
    /// temporary's name on a link, or a folder that is a link, leaves what is outside alone.
    #[cfg(target_os = "linux")]
    #[test]
    fn stale_temporaries_are_removed_beneath_and_never_through_a_link() {
        use std::os::unix::fs::symlink;
        let (base, root, outside) = beneath_scratch("stale-beneath");
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let ended = child.id();
        child.wait().unwrap();
        // Temporaries of a writer that has ended, named as `write_atomic` names them.
        let ended_writers = |name: &str| {
            let ours = format!("{}-", std::process::id());
            temporary_name(name).replacen(&ours, &format!("{ended}-"), 1)
        };
        let stale = ended_writers("talk.wav");
        assert_eq!(temporary_owner(&stale), Some(ended));
        std::fs::write(outside.join(&stale), b"keep").unwrap();
        std::fs::write(root.join("speech").join(&stale), b"x").unwrap();
        std::fs::write(root.join(&stale), b"x").unwrap();
        symlink(outside.join(&stale), root.join(ended_writers("a.wav"))).unwrap();
        symlink(&outside, root.join("exports")).unwrap();
        let b = Beneath::open(&root, "project").unwrap();
        assert_eq!(remove_stale_temporaries_beneath(&b, "exports"), 0);
        assert_eq!(remove_stale_temporaries_beneath(&b, ""), 1);
        assert_eq!(remove_stale_temporaries_beneath(&b, "speech"), 1);
        assert_eq!(remove_stale_temporaries_beneath(&b, "missing"), 0);
        assert!(!root.join(&stale).exists());
        assert!(!root.join("speech").join(&stale).exists());
        assert_eq!(std::fs::read(outside.join(&stale)).unwrap(), b"keep");
        std::fs::remove_dir_all(base).unwrap();
    }

    /// The one-call path: `openat2` itself refuses a link and `..`, where the kernel has it.
    #[cfg(target_os = "linux")]
    #[test]
    fn openat2_resolves_beneath_and_refuses_links_where_the_kernel_has_it() {
        let (base, root, outside) = beneath_scratch("openat2");
        std::os::unix::fs::symlink(&outside, root.join("exports")).unwrap();
        let b = Beneath::open(&root, "project").unwrap();
        let dir = libc::O_RDONLY | libc::O_DIRECTORY;
        match sys::open_beneath(&b.dir, Path::new("speech"), dir) {
            Some(_) => {
                for refused in ["exports", "../outside", "speech/../../outside"] {
                    assert!(
                        sys::open_beneath(&b.dir, Path::new(refused), dir).is_none(),
                        "{refused}"
                    );
                }
            }
            None => eprintln!("openat2 is not available here: the walk does the work"),
        }
        std::fs::remove_dir_all(base).unwrap();
    }
}
