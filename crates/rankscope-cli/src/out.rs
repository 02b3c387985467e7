//! Standard output: a closed pipe (`rankscope analyze … | head`) ends the program quietly with
//! exit code 0, as `head` expects of the writer; any other write error (a full disk) is an
//! error message, never a panic (`println!` panics on both).

use std::io::Write as _;

/// The reader of stdout went away; `main` turns this into a quiet exit 0.
#[derive(Debug)]
pub struct PipeClosed;

impl std::fmt::Display for PipeClosed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("standard output was closed")
    }
}

impl std::error::Error for PipeClosed {}

/// Writes `text` to stdout and flushes it.
pub fn emit(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(PipeClosed.into()),
        Err(e) => Err(anyhow::anyhow!("cannot write to standard output: {e}")),
    }
}

/// Writes text for a person (text, Markdown, CSV) to stdout: control characters from the input
/// escaped ([`rankscope_core::escape::terminal`]: a trace or file name holding `ESC ] 0 ;` would
/// retitle the window, OSC 52 write the clipboard). JSON goes through [`emit`] (serde escapes).
pub fn emit_text(text: &str) -> anyhow::Result<()> {
    emit(&rankscope_core::escape::terminal(text))
}

/// A message to stderr, `rankscope: ` first, control characters from the input escaped.
pub fn say(msg: &str) {
    eprintln!("rankscope: {}", rankscope_core::escape::terminal(msg));
}

/// Whether an error (anywhere in its chain) is a closed stdout.
pub fn is_pipe_closed(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<PipeClosed>().is_some()
            || c.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
