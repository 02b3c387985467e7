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

/// Writes a Markdown report laid out for a terminal ([`rankscope_core::terminal`]): bold and
/// tables cut to the width (`$COLUMNS`, else 120) when stdout is a terminal (no bold with
/// `NO_COLOR`), plain and whole when it is a pipe or a file; long tables shortened unless
/// `all`. Control characters from the input are escaped by the layout itself.
pub fn emit_report(md: &str, all: bool) -> anyhow::Result<()> {
    use std::io::IsTerminal as _;
    let tty = std::io::stdout().is_terminal();
    let columns =
        std::env::var("COLUMNS").ok().and_then(|c| c.trim().parse::<usize>().ok()).filter(|&c| c >= 20);
    let style = rankscope_core::terminal::Style {
        width: if tty { Some(columns.unwrap_or(120)) } else { columns },
        all_rows: all,
        bold: tty && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
    };
    emit(&rankscope_core::terminal::from_markdown(md, &style))
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
