//! What the CLI prints on standard output goes through here (see `println!` in `main.rs`).

use std::io::Write;

/// Writes `args` and a newline to standard output.
pub fn write_line(args: std::fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    let result = out.write_fmt(args).and_then(|()| out.write_all(b"\n"));
    finish(result);
}

/// Writes `args` to standard output.
pub fn write(args: std::fmt::Arguments<'_>) {
    finish(std::io::stdout().lock().write_fmt(args));
}

fn finish(result: std::io::Result<()>) {
    match result {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => reader_went_away(),
        Err(e) => {
            eprintln!("headroom: cannot write to standard output: {e}");
            std::process::exit(1);
        }
    }
}

/// Ends the process the way a Unix tool ends when its reader goes away: by SIGPIPE, with no
/// message (the shell reports status 141 only under `pipefail`).
fn reader_went_away() -> ! {
    #[cfg(unix)]
    // SAFETY: restoring the default disposition and raising the signal only ends the process.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        libc::raise(libc::SIGPIPE);
    }
    std::process::exit(141)
}
