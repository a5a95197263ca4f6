//! Opening a file someone named for reading (a recording, a voice clip, a transcript): only a
//! regular file, and never by blocking on it. A named pipe opened for reading waits for a
//! writer forever, and a device reads without end; both are refused before a byte is read.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

/// What stands where a regular file was wanted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotRegular {
    Folder,
    NamedPipe,
    Socket,
    CharacterDevice,
    BlockDevice,
    Other,
}

impl NotRegular {
    fn of(file_type: std::fs::FileType) -> NotRegular {
        #[cfg(unix)]
        {
            use std::os::unix::fs::FileTypeExt;
            if file_type.is_fifo() {
                return NotRegular::NamedPipe;
            }
            if file_type.is_socket() {
                return NotRegular::Socket;
            }
            if file_type.is_char_device() {
                return NotRegular::CharacterDevice;
            }
            if file_type.is_block_device() {
                return NotRegular::BlockDevice;
            }
        }
        if file_type.is_dir() {
            NotRegular::Folder
        } else {
            NotRegular::Other
        }
    }

    fn described(self) -> &'static str {
        match self {
            NotRegular::Folder => "a folder",
            NotRegular::NamedPipe => "a named pipe (FIFO)",
            NotRegular::Socket => "a socket",
            NotRegular::CharacterDevice => "a character device",
            NotRegular::BlockDevice => "a block device",
            NotRegular::Other => "not a regular file",
        }
    }
}

/// A path that names something other than a regular file. It travels inside an
/// [`io::Error`] (kind `InvalidInput`), so every reader's own error type carries it.
#[derive(Debug, thiserror::Error)]
#[error("{} is {}, not a regular file: Headroom reads only regular files", .path.display(), .found.described())]
pub struct NotARegularFile {
    pub path: PathBuf,
    pub found: NotRegular,
}

impl NotARegularFile {
    /// The refusal inside `error`, if that is what it is.
    pub fn inside(error: &io::Error) -> Option<&NotARegularFile> {
        error.get_ref()?.downcast_ref::<NotARegularFile>()
    }
}

/// Opens `path` for reading if it is a regular file (a link to one is followed, as a user's
/// own path may be one). The open itself cannot block: it is non-blocking, and the file is
/// made blocking again only once it is known to be regular.
pub fn open_regular(path: &Path) -> io::Result<File> {
    #[cfg(unix)]
    let file = {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)?
    };
    #[cfg(not(unix))]
    let file = File::open(path)?;
    ensure_regular(&file, path)?;
    #[cfg(unix)]
    set_blocking(&file)?;
    Ok(file)
}

/// Reads the whole regular file at `path` (as [`std::fs::read`], through [`open_regular`]),
/// refusing one longer than `limit` bytes before reading it.
pub fn read_regular(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let file = open_regular(path)?;
    let len = file.metadata()?.len();
    if len > limit {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{} holds {len} bytes; at most {limit} are read",
                path.display()
            ),
        ));
    }
    let mut bytes = Vec::with_capacity(len as usize);
    // The bound holds even if the file grows while it is read.
    file.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} grew past {limit} bytes while read", path.display()),
        ));
    }
    Ok(bytes)
}

/// `file` (opened from `path`) is a regular file, or the refusal naming what it is.
pub fn ensure_regular(file: &File, path: &Path) -> io::Result<()> {
    let file_type = file.metadata()?.file_type();
    if file_type.is_file() {
        return Ok(());
    }
    Err(io::Error::new(
        io::ErrorKind::InvalidInput,
        NotARegularFile {
            path: path.to_path_buf(),
            found: NotRegular::of(file_type),
        },
    ))
}

/// Clears `O_NONBLOCK` on an opened file.
#[cfg(unix)]
pub fn set_blocking(file: &File) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let fd = file.as_raw_fd();
    // SAFETY: a live descriptor; F_GETFL/F_SETFL change only its status flags.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn refusal(path: &Path) -> NotRegular {
        let error = open_regular(path).unwrap_err();
        let refused = NotARegularFile::inside(&error).unwrap_or_else(|| panic!("{error}"));
        assert!(error.to_string().contains("not a regular file"), "{error}");
        refused.found
    }

    #[test]
    fn only_regular_files_open_and_a_pipe_never_blocks() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe.wav");
        let name = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid path.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        // Without O_NONBLOCK this open waits for a writer that never comes.
        assert_eq!(refusal(&fifo), NotRegular::NamedPipe);
        assert_eq!(refusal(Path::new("/dev/zero")), NotRegular::CharacterDevice);
        assert_eq!(refusal(dir.path()), NotRegular::Folder);
        let socket = dir.path().join("s.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        // A socket cannot be opened at all (ENXIO): refused all the same.
        assert!(open_regular(&socket).is_err());

        let file = dir.path().join("clip.wav");
        std::fs::write(&file, b"RIFF").unwrap();
        let link = dir.path().join("link.wav");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert_eq!(read_regular(&link, 4).unwrap(), b"RIFF");
        // Reads from the opened file block again as usual.
        let opened = open_regular(&file).unwrap();
        // SAFETY: a live descriptor.
        let flags = unsafe { libc::fcntl(std::os::fd::AsRawFd::as_raw_fd(&opened), libc::F_GETFL) };
        assert_eq!(flags & libc::O_NONBLOCK, 0);
        let error = read_regular(&file, 3).unwrap_err();
        assert!(error.to_string().contains("at most 3"), "{error}");
    }
}
