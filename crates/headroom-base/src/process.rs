//! Programs Headroom starts (espeak-ng, pip, the system's file opener, nvidia-smi), with one
//! rule: **data never takes an option's place**. Text, names and paths that come from a user,
//! a web page or a model reach a program only
//! - on its standard input ([`Tool::run`]),
//! - as the value of an option written in the code ([`Tool::option`]), refused when it starts
//!   with `-` (some parsers, argparse among them, read `-d -x` as two options),
//! - as a path made unambiguous ([`Tool::path`]: `./-x`, never `-x`), or
//! - after `--` ([`Tool::operands`]).
//!
//! Flags are `&'static str`, so a flag can only be text written in Headroom's source. Every
//! subprocess in the workspace is started here (`tests/tests/architecture.rs` checks it).

use std::ffi::{OsStr, OsString};
use std::io::{Read, Write};
use std::path::{Component, Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};

/// Why a program could not be run with what it was given.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    /// A value would be read as an option, or cannot be passed at all (a NUL byte).
    #[error("{program}: refusing to pass {shown:?} as the value of {flag}: {reason}")]
    UnsafeArgument {
        program: String,
        flag: &'static str,
        shown: String,
        reason: &'static str,
    },
    /// The program is not installed (not on `PATH`, or not at the path given).
    #[error("{program} is not installed or not on PATH")]
    NotFound { program: String },
    #[error("cannot run {program}: {source}")]
    Io {
        program: String,
        #[source]
        source: std::io::Error,
    },
}

impl ProcessError {
    /// Whether the program itself is missing (the caller may say how to install it).
    pub fn is_not_found(&self) -> bool {
        matches!(self, ProcessError::NotFound { .. })
    }
}

/// What a finished program left: its status and everything it wrote.
#[derive(Debug)]
pub struct Finished {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// With [`Tool::watching_memory`]: the most memory the program held resident at once
    /// (its own `VmHWM`, read every 20 ms while it ran), in KiB; `None` when not watched, off
    /// Linux, or when it ended before the first reading (20 ms after it started).
    pub peak_rss_kib: Option<u64>,
}

/// A program and its arguments, built so that data cannot become an option.
#[derive(Debug)]
pub struct Tool {
    program: OsString,
    args: Vec<OsString>,
    operands: Vec<OsString>,
    problem: Option<ProcessError>,
    watch_memory: bool,
}

impl Tool {
    /// `program`, a name on `PATH` or a path (from configuration, never from a request).
    pub fn new(program: impl AsRef<OsStr>) -> Tool {
        Tool {
            program: program.as_ref().to_owned(),
            args: Vec::new(),
            operands: Vec::new(),
            problem: None,
            watch_memory: false,
        }
    }

    fn name(&self) -> String {
        self.program.to_string_lossy().into_owned()
    }

    /// [`Tool::run`] reads the program's peak resident memory while it runs (a benchmark
    /// measuring a whole process): see [`Finished::peak_rss_kib`].
    pub fn watching_memory(mut self) -> Tool {
        self.watch_memory = true;
        self
    }

    /// A flag written in the code: `-q`, `--ipa`.
    pub fn flag(mut self, flag: &'static str) -> Tool {
        debug_assert!(flag.starts_with('-'), "a flag starts with '-': {flag}");
        self.args.push(flag.into());
        self
    }

    /// A subcommand written in the code: `download` in `pip download`.
    pub fn subcommand(mut self, word: &'static str) -> Tool {
        debug_assert!(!word.starts_with('-'), "a subcommand is not a flag: {word}");
        self.args.push(word.into());
        self
    }

    /// `flag` followed by `value` as its own argument. A value that starts with `-` or holds a
    /// NUL byte is refused (the run then fails with [`ProcessError::UnsafeArgument`]).
    pub fn option(mut self, flag: &'static str, value: impl AsRef<OsStr>) -> Tool {
        let value = value.as_ref();
        let reason = if value.to_string_lossy().starts_with('-') {
            Some("it starts with '-' and would be read as an option")
        } else if value.as_encoded_bytes().contains(&0) {
            Some("it contains a NUL byte")
        } else if value.is_empty() {
            Some("it is empty")
        } else {
            None
        };
        if let Some(reason) = reason {
            self.refuse(flag, value, reason);
        }
        self.args.push(flag.into());
        self.args.push(value.to_owned());
        self
    }

    /// `flag` followed by a path, made unambiguous: a relative path that starts with `-` is
    /// passed as `./-...`.
    pub fn path_option(mut self, flag: &'static str, path: &Path) -> Tool {
        self.args.push(flag.into());
        let path = self.checked_path(flag, path);
        self.args.push(path.into_os_string());
        self
    }

    /// A path as an operand of a program that takes no `--` (`xdg-open`): absolute, or
    /// relative and starting with `./`, so never an option.
    pub fn path(mut self, path: &Path) -> Tool {
        let path = self.checked_path("(operand)", path);
        self.args.push(path.into_os_string());
        self
    }

    /// Operands placed after `--`, where every parser stops reading options.
    pub fn operands<I, S>(mut self, operands: I) -> Tool
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        for operand in operands {
            let operand = operand.as_ref();
            if operand.as_encoded_bytes().contains(&0) {
                self.refuse("--", operand, "it contains a NUL byte");
            }
            self.operands.push(operand.to_owned());
        }
        self
    }

    fn checked_path(&mut self, flag: &'static str, path: &Path) -> PathBuf {
        if path.as_os_str().as_encoded_bytes().contains(&0) {
            self.refuse(flag, path.as_os_str(), "it contains a NUL byte");
        }
        match path.components().next() {
            Some(Component::Normal(_)) => Path::new(".").join(path),
            _ => path.to_path_buf(),
        }
    }

    fn refuse(&mut self, flag: &'static str, value: &OsStr, reason: &'static str) {
        if self.problem.is_none() {
            let shown: String = value.to_string_lossy().chars().take(80).collect();
            self.problem = Some(ProcessError::UnsafeArgument {
                program: self.name(),
                flag,
                shown,
                reason,
            });
        }
    }

    /// The arguments as they will be passed (for tests and logs).
    pub fn argv(&self) -> Vec<OsString> {
        let mut argv = self.args.clone();
        if !self.operands.is_empty() {
            argv.push("--".into());
            argv.extend(self.operands.iter().cloned());
        }
        argv
    }

    fn command(self) -> Result<(Command, String), ProcessError> {
        if let Some(problem) = self.problem {
            return Err(problem);
        }
        let name = self.name();
        let mut command = Command::new(&self.program);
        command.args(self.argv());
        Ok((command, name))
    }

    fn spawn_error(program: &str, source: std::io::Error) -> ProcessError {
        if source.kind() == std::io::ErrorKind::NotFound {
            ProcessError::NotFound {
                program: program.to_string(),
            }
        } else {
            ProcessError::Io {
                program: program.to_string(),
                source,
            }
        }
    }

    /// Runs the program with `input` on its standard input, to the end, and returns what it
    /// wrote. The input is fed from a thread of its own, so a program that writes a lot before
    /// it has read everything (espeak-ng on a long text) cannot deadlock against us.
    pub fn run(self, input: &[u8]) -> Result<Finished, ProcessError> {
        // Started for batch work, the program inherits the batch threads' idle priority: an
        // espeak-ng narrating in the background never slows one speaking for the person.
        crate::cpu::compute(move || self.run_here(input))
    }

    fn run_here(self, input: &[u8]) -> Result<Finished, ProcessError> {
        let watch = self.watch_memory;
        let (mut command, program) = self.command()?;
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| Self::spawn_error(&program, e))?;
        let mut stdin = child.stdin.take().expect("piped stdin");
        let mut stdout = child.stdout.take().expect("piped stdout");
        let mut stderr = child.stderr.take().expect("piped stderr");
        let io_error = |source| ProcessError::Io {
            program: program.clone(),
            source,
        };
        let (out, err, peak, status) = std::thread::scope(|scope| {
            // A program that exits without reading all its input closes the pipe; that is its
            // business, and its status says how it went.
            scope.spawn(move || {
                let _ = stdin.write_all(input);
            });
            let out = scope.spawn(move || {
                let mut buf = Vec::new();
                stdout.read_to_end(&mut buf).map(|_| buf)
            });
            let err = scope.spawn(move || {
                let mut buf = Vec::new();
                stderr.read_to_end(&mut buf).map(|_| buf)
            });
            let (stop_watching, stopped) = std::sync::mpsc::channel::<()>();
            let pid = child.id();
            let peak = watch.then(|| scope.spawn(move || watch_peak_memory(pid, stopped)));
            // Exited, not yet reaped: its pid cannot be another process's while it is read.
            let exited = wait_unreaped(&mut child);
            drop(stop_watching);
            let peak = peak.and_then(|h| h.join().expect("the memory watcher does not panic"));
            let status = exited.and_then(|()| child.wait());
            let joined = |h: std::thread::ScopedJoinHandle<'_, std::io::Result<Vec<u8>>>| {
                h.join().expect("a pipe reader does not panic")
            };
            (joined(out), joined(err), peak, status)
        });
        Ok(Finished {
            status: status.map_err(io_error)?,
            stdout: out.map_err(io_error)?,
            stderr: err.map_err(io_error)?,
            peak_rss_kib: peak,
        })
    }

    /// Starts the program and keeps it running: no standard input, its output appended to
    /// `log` (or discarded). The [`Running`] handle kills it when dropped.
    pub fn start(self, log: Option<&Path>) -> Result<Running, ProcessError> {
        let (mut command, program) = self.command()?;
        let io = |source| ProcessError::Io {
            program: program.clone(),
            source,
        };
        let (stdout, stderr) = match log {
            Some(path) => {
                let file = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .map_err(io)?;
                (
                    Stdio::from(file.try_clone().map_err(io)?),
                    Stdio::from(file),
                )
            }
            None => (Stdio::null(), Stdio::null()),
        };
        let child = command
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .spawn()
            .map_err(|e| Self::spawn_error(&program, e))?;
        Ok(Running { child, program })
    }

    /// Starts the program detached from Headroom's streams (a file opener), not waiting; a
    /// thread of its own collects its exit, so none is left a zombie. Its process id.
    pub fn launch(self) -> Result<u32, ProcessError> {
        let (mut command, program) = self.command()?;
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| Self::spawn_error(&program, e))?;
        let id = child.id();
        let reaped = std::thread::Builder::new()
            .name(format!("reap {program}"))
            .spawn(move || {
                if let Err(e) = child.wait() {
                    tracing::debug!(error = %e, "a launched program's exit was not collected");
                }
            });
        if let Err(e) = reaped {
            tracing::warn!(error = %e, program, "no thread to collect a launched program's exit");
        }
        Ok(id)
    }
}

/// The program's own peak resident memory (`VmHWM` in `/proc/PID/status`, in KiB), read
/// every 20 ms until `stop` says it has exited. (The kernel's `ru_maxrss` will not do: it
/// counts the memory of the process it was started from, before `exec`.)
fn watch_peak_memory(pid: u32, stop: std::sync::mpsc::Receiver<()>) -> Option<u64> {
    const EVERY: std::time::Duration = std::time::Duration::from_millis(20);
    let path = format!("/proc/{pid}/status");
    let read = || -> Option<u64> {
        let status = std::fs::read_to_string(&path).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
        line.split_whitespace().nth(1)?.parse().ok()
    };
    // Not read at once: `spawn` returns when the kernel wakes the parent during `exec`,
    // a moment before the child leaves the parent's memory for its own, and a reading then
    // is the parent's high-water mark (seen: a 0.2 s `sh` read as 440 MiB, its parent's).
    if !matches!(
        stop.recv_timeout(EVERY),
        Err(std::sync::mpsc::RecvTimeoutError::Timeout)
    ) {
        return None;
    }
    let mut peak = None;
    loop {
        // An exited program that is not reaped yet has no memory left to read.
        if let Some(now) = read() {
            peak = Some(peak.map_or(now, |p: u64| p.max(now)));
        }
        match stop.recv_timeout(EVERY) {
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => continue,
            _ => return peak,
        }
    }
}

/// Waits until `child` has exited, leaving it to be reaped (`waitid` with `WNOWAIT`).
#[cfg(target_os = "linux")]
fn wait_unreaped(child: &mut std::process::Child) -> std::io::Result<()> {
    let pid = child.id() as libc::id_t;
    loop {
        // SAFETY: siginfo_t is plain data the kernel fills in; it outlives the call.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: as above; `pid` is our own child, not yet reaped.
        let done =
            unsafe { libc::waitid(libc::P_PID, pid, &mut info, libc::WEXITED | libc::WNOWAIT) };
        if done == 0 {
            return Ok(());
        }
        let error = std::io::Error::last_os_error();
        if error.kind() != std::io::ErrorKind::Interrupted {
            return Err(error);
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn wait_unreaped(child: &mut std::process::Child) -> std::io::Result<()> {
    child.wait().map(|_| ())
}

/// A program started to keep running (a server a benchmark starts): stopped with
/// [`Running::kill`], and killed when dropped so none outlives its owner.
#[derive(Debug)]
pub struct Running {
    child: std::process::Child,
    program: String,
}

impl Running {
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    pub fn program(&self) -> &str {
        &self.program
    }

    /// Whether the program has ended (and how), without waiting.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Kills the program at once (SIGKILL: no chance to close its connections cleanly, as when
    /// a machine is lost) and waits for it to be gone.
    pub fn kill(&mut self) -> std::io::Result<ExitStatus> {
        if let Some(status) = self.exited() {
            return Ok(status);
        }
        match self.child.kill() {
            Ok(()) => {}
            // It ended between the check and the signal.
            Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => {}
            Err(e) => return Err(e),
        }
        self.child.wait()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.kill();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_that_look_like_options_are_refused_before_anything_runs() {
        for hostile in ["--phonout=/tmp/x", "-f/etc/passwd", "-", "a\0b", ""] {
            let tool = Tool::new("true").option("-v", hostile);
            let err = tool.run(b"").unwrap_err();
            assert!(
                matches!(err, ProcessError::UnsafeArgument { flag: "-v", .. }),
                "{hostile:?}: {err}"
            );
        }
        // An ordinary value passes as it is, right after its flag.
        let tool = Tool::new("true").option("-v", "en-us");
        assert_eq!(tool.argv(), ["-v", "en-us"]);
    }

    #[test]
    fn paths_and_operands_cannot_be_read_as_options() {
        let tool = Tool::new("x")
            .path_option("-d", Path::new("-rf"))
            .path(Path::new("--help"))
            .path(Path::new("/abs/-x"))
            .operands(["-f/etc/passwd", "--phonout=v"]);
        assert_eq!(
            tool.argv(),
            [
                "-d",
                "./-rf",
                "./--help",
                "/abs/-x",
                "--",
                "-f/etc/passwd",
                "--phonout=v"
            ]
        );
    }

    /// Reported: each "open report" left a zombie (`launch` never waited on its child).
    #[cfg(target_os = "linux")]
    #[test]
    fn a_launched_program_is_never_left_a_zombie() {
        let id = Tool::new("true").launch().unwrap();
        let stat = format!("/proc/{id}/stat");
        let give_up = std::time::Instant::now() + std::time::Duration::from_secs(30);
        // Gone once its exit is collected; a zombie stays, in state `Z`, until then.
        while let Ok(line) = std::fs::read_to_string(&stat) {
            let state = line[line.rfind(')').unwrap() + 2..].chars().next();
            assert!(
                std::time::Instant::now() < give_up,
                "process {id} still there after 30 s, state {state:?}"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    #[test]
    fn input_goes_on_stdin_whole_even_when_larger_than_a_pipe() {
        // `cat` writes while it reads: 1 MiB in and out would deadlock a naive write-then-read.
        let input: Vec<u8> = (0..1 << 20).map(|i| b"-\n\0a\xe2"[i % 5]).collect();
        let done = Tool::new("cat").run(&input).unwrap();
        assert!(done.status.success());
        assert_eq!(done.stdout, input);
    }

    #[test]
    fn a_watched_program_says_how_much_memory_it_held_at_its_peak_and_no_more() {
        // `sort`, given room, holds all of its input before it writes: 64 MiB in, at least as
        // much held.
        let input: Vec<u8> = (0..64usize << 20).map(|i| b"ab\n"[i % 3]).collect();
        let big = Tool::new("sort")
            .watching_memory()
            .option("--buffer-size", "256M")
            .run(&input)
            .unwrap();
        assert!(big.status.success());
        let peak = big.peak_rss_kib.expect("sort ran long enough to be read");
        assert!(peak >= 64 << 10, "sort: {peak} KiB");
        // This process holds hundreds of MiB; a small program it starts is not charged them.
        let held: Vec<u8> = vec![1; 256 << 20];
        let small = Tool::new("sh")
            .watching_memory()
            .option("-c", "sleep 0.2")
            .run(b"")
            .unwrap();
        assert_eq!(
            held.iter()
                .step_by(4096)
                .map(|&b| b as usize)
                .sum::<usize>(),
            65536
        );
        let peak = small.peak_rss_kib.expect("sh ran for 0.2 s");
        assert!(peak < 32 << 10, "sh: {peak} KiB");
        // Not watched: nothing read.
        assert_eq!(Tool::new("true").run(b"").unwrap().peak_rss_kib, None);
    }

    #[test]
    fn a_started_program_keeps_running_until_killed() {
        let log = std::env::temp_dir().join(format!("headroom-start-{}.log", std::process::id()));
        let _ = std::fs::remove_file(&log);
        let mut running = Tool::new("sh")
            .flag("-c")
            .operands(["echo started; exec sleep 30"])
            .start(Some(&log))
            .unwrap();
        // The shell writes its line, then sleeps: wait (bounded) for the line.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while std::fs::read_to_string(&log).unwrap_or_default().is_empty() {
            assert!(
                std::time::Instant::now() < deadline,
                "the program never wrote"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(running.exited().is_none());
        let status = running.kill().unwrap();
        assert!(!status.success());
        assert!(running.exited().is_some());
        assert_eq!(std::fs::read_to_string(&log).unwrap(), "started\n");
        let _ = std::fs::remove_file(&log);
        let err = Tool::new("headroom-no-such-program")
            .start(None)
            .unwrap_err();
        assert!(err.is_not_found(), "{err}");
    }

    #[test]
    fn a_missing_program_says_so() {
        let err = Tool::new("headroom-no-such-program").run(b"").unwrap_err();
        assert!(err.is_not_found(), "{err}");
    }
}
