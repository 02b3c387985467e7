//! rankscope on a machine with files, for every shell that has a file system (the CLI, the
//! Python package): folders walked as the app walks a dropped folder, each input's kind decided
//! by content ([`rankscope_core::job::detect`]), traces read in chunks on every core, and the
//! job made by the core's job API ([`rankscope_core::job`]). Nothing here prints: notes come
//! back as values, progress through a callback.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use anyhow::{Context, Result};
use rankscope_core::analyze::RankPart;
use rankscope_core::inspect::FailedFile;
pub use rankscope_core::job::InputKind;
use rankscope_core::job::{self, JobOutput, RankClaim, Text, TextRef};
use rankscope_core::model::RankTrace;
use rankscope_core::normalize::{assemble, assemble_with, Job, Rules};
use rankscope_core::parse::FileIngest;

/// One input file, and whether it was found by walking a folder (rather than named).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Input {
    pub path: PathBuf,
    pub walked: bool,
}

/// Expands files and directories into input files: a directory contributes every regular file
/// below it whose name the app would take from the same folder
/// ([`rankscope_core::job::is_folder_candidate`]: `.json`, `.json.gz`, `.log`, `.txt`, `.out`,
/// any case) or that is a Flight Recorder dump (sorted); what each is, is decided by content; a file named explicitly is taken whatever its
/// name or kind (`<(zcat trace.gz)` is a pipe). The walk visits each real directory once (a
/// symlink to `.` or to a parent is not a loop), takes each real file once however many links
/// lead to it, and skips special files (a FIFO named `*.json` is never opened), links named like
/// an input that lead to a folder, and sub-folders it cannot list, each with a note.
pub fn expand(paths: &[PathBuf], notes: &mut Vec<String>) -> Result<Vec<Input>> {
    let mut out = Vec::new();
    let mut dirs = std::collections::BTreeSet::new();
    let mut seen = std::collections::BTreeSet::new();
    for p in paths {
        let meta = std::fs::metadata(p).with_context(|| format!("cannot read {}", p.display()))?;
        if meta.is_dir() {
            let mut found = Vec::new();
            walk(p, &mut found, &mut dirs, &mut seen, notes)?;
            found.sort();
            out.extend(found.into_iter().map(|path| Input { path, walked: true }));
        } else {
            if let Ok(c) = std::fs::canonicalize(p) {
                seen.insert(c);
            }
            out.push(Input { path: p.clone(), walked: false });
        }
    }
    Ok(out)
}

fn walk(
    dir: &Path,
    out: &mut Vec<PathBuf>,
    dirs: &mut std::collections::BTreeSet<PathBuf>,
    seen: &mut std::collections::BTreeSet<PathBuf>,
    notes: &mut Vec<String>,
) -> Result<()> {
    let real = std::fs::canonicalize(dir).with_context(|| format!("cannot read {}", dir.display()))?;
    if !dirs.insert(real) {
        return Ok(());
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot list {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for path in entries {
        // `metadata` follows symlinks: a link is what it points to (a dangling one is skipped).
        let Ok(meta) = std::fs::metadata(&path) else { continue };
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let json_name = rankscope_core::job::is_folder_candidate(name);
        if meta.is_dir() {
            // A link named like an input (`trace.json` → /tmp) is not a folder of this job:
            // walking it pulled in other people's traces.
            if json_name && std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink()) {
                notes.push(format!(
                    "skipped {} (a link named like a file that leads to a folder)",
                    path.display()
                ));
                continue;
            }
            // A sub-folder that cannot be listed is a note: the rest of the walk is the job.
            if let Err(e) = walk(&path, out, dirs, seen, notes) {
                notes.push(format!("skipped {}: {e:#}", path.display()));
            }
            continue;
        }
        if !meta.is_file() {
            if json_name {
                notes.push(format!("skipped {} (not a regular file)", path.display()));
            }
            continue;
        }
        // Flight Recorder dumps carry any name (`fr_rank0`, `*.pkl`): asked by content.
        if !json_name && sniff_file(&path) != InputKind::FlightRecorder {
            continue;
        }
        let real = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
        if seen.insert(real) {
            out.push(path);
        }
    }
    Ok(())
}

/// Why a file could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadError {
    pub message: String,
    /// The bytes were read, and they are not a trace (rather than an I/O failure).
    pub not_a_trace: bool,
}

impl ReadError {
    fn io(message: String) -> Self {
        ReadError { message, not_a_trace: false }
    }
}

/// Reads one file in chunks through the core's streaming ingest.
pub fn read_trace(path: &Path, chunk: usize, progress: &dyn Fn(u64)) -> Result<RankTrace, ReadError> {
    let name = path.display().to_string();
    let mut ingest = FileIngest::new(&name);
    read_chunks(path, &name, chunk, &mut |b| {
        ingest.feed(b);
        progress(b.len() as u64);
        !ingest.failed()
    })?;
    ingest.finish().map_err(|e| ReadError { message: e.to_string(), not_a_trace: true })
}

/// Reads `path` from the start in `chunk`-byte reads into `each`, until the end or until `each`
/// answers `false`.
fn read_chunks(
    path: &Path,
    name: &str,
    chunk: usize,
    each: &mut dyn FnMut(&[u8]) -> bool,
) -> Result<(), ReadError> {
    let f = std::fs::File::open(path).map_err(|e| ReadError::io(format!("{name}: cannot open: {e}")))?;
    // A regular file is read to the length it had when it was opened: one appended to faster
    // than it is read (a profiler still writing) never ended. A pipe is read to its end.
    let len = f.metadata().ok().filter(std::fs::Metadata::is_file).map_or(u64::MAX, |m| m.len());
    let mut f = f.take(len);
    with_read_buf(chunk, |buf| loop {
        let n = match f.read(buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(ReadError::io(format!("{name}: read error: {e}"))),
        };
        if !each(&buf[..n]) {
            return Ok(());
        }
    })
}

thread_local! {
    /// The thread's read buffer, kept between files and pieces: a fresh one per file cost a page
    /// fault per 4 KiB on its first read (a quarter of `analyze`'s page faults on 8 files).
    static READ_BUF: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// Runs `f` with a `len`-byte buffer (at least one byte), the thread's kept one when it is free.
fn with_read_buf<R>(len: usize, f: impl FnOnce(&mut [u8]) -> R) -> R {
    let len = len.max(1);
    // Taken out while in use, so a nested read gets a buffer of its own.
    let mut buf = READ_BUF.with(std::cell::Cell::take);
    if buf.len() < len {
        buf = vec![0u8; len];
    }
    let r = f(&mut buf[..len]);
    READ_BUF.with(|c| {
        let kept = c.take();
        c.set(if kept.len() > buf.len() { kept } else { buf });
    });
    r
}

/// Files smaller than this are parsed on one core (the pieces would not pay for themselves).
/// `RANKSCOPE_SPLIT_MIN_BYTES` overrides it (tests), `RANKSCOPE_PARSE_THREADS=1` turns
/// splitting off.
const SPLIT_MIN_BYTES: u64 = 64 << 20;

fn env_num(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

/// Reads `[from, to)` of `f` in `chunk`-byte reads into `feed`.
fn read_range(
    f: &std::fs::File,
    from: u64,
    to: u64,
    chunk: usize,
    feed: &mut dyn FnMut(&[u8]),
) -> Option<()> {
    use std::os::unix::fs::FileExt;
    with_read_buf(chunk, |buf| {
        let mut at = from;
        while at < to {
            let want = ((to - at) as usize).min(buf.len());
            let n = match f.read_at(&mut buf[..want], at) {
                Ok(0) => return None,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => return None,
            };
            feed(&buf[..n]);
            at += n as u64;
        }
        Some(())
    })
}

/// Pieces of about this many bytes: many more than cores, so that the threads stay busy to the
/// end, each piece is merged while later ones are parsed, and few are held at once.
/// `RANKSCOPE_CUT_BLOCK_BYTES` overrides it (tests), as for the gzip cut.
const PIECE_BYTES: u64 = 4 << 20;

/// Reads of the pieces (a buffer per piece): small enough to stay out of the way of the
/// allocator's reuse (a 4 MiB buffer per piece, freed on several threads, left the heap
/// fragmented: 20 MB more at the peak on a 400 MB file).
const PIECE_READ_BYTES: usize = 1 << 20;

/// Compressed bytes read at a time when cutting gzip: the pieces cut from one read wait until it
/// is inflated, and Kineto's JSON inflates 8–15×, so 4 MiB reads held about 50 MB of pieces
/// back (and the workers idle) before handing them on.
const CUT_READ_BYTES: usize = 256 << 10;

/// The first seam at or after `at` in a `len`-byte file ([`split::seam_windows`]).
///
/// [`split::seam_windows`]: rankscope_core::parse::split::seam_windows
fn seam_at(f: &std::fs::File, at: u64, len: u64) -> Option<(u64, u64)> {
    use rankscope_core::parse::split;
    use std::os::unix::fs::FileExt;
    for (from, to) in split::seam_windows(at, len) {
        let mut window = vec![0u8; usize::try_from(to - from).ok()?];
        f.read_exact_at(&mut window, from).ok()?;
        if let Some(seam) = split::seam_in(&window, from) {
            return Some(seam);
        }
    }
    None
}

/// Middle pieces merged in file order as they are parsed ([`rankscope_core::parse::Merger`]):
/// a thread that parsed a piece offers it, and whichever thread finds the merger free appends
/// every piece that is due. The merge runs on the parsing threads between pieces instead of after
/// them all, no thread waits for another's merging, and a piece is dropped once merged.
struct MergeQueue {
    inbox: Mutex<Vec<(usize, RankTrace)>>,
    merger: Mutex<Option<rankscope_core::parse::Merger>>,
    doubt: std::sync::atomic::AtomicBool,
    /// The file's text length as far as known ([`rankscope_core::parse::Merger::expect_text_bytes`]).
    expected_text: AtomicU64,
}

impl MergeQueue {
    fn new() -> Self {
        MergeQueue {
            inbox: Mutex::new(Vec::new()),
            merger: Mutex::new(None),
            doubt: Default::default(),
            expected_text: AtomicU64::new(0),
        }
    }

    /// The merger, started from the frame's head; pieces offered before it wait in the inbox.
    fn install(&self, m: rankscope_core::parse::Merger) {
        match self.merger.lock() {
            Ok(mut g) => *g = Some(m),
            Err(_) => self.doubt.store(true, Ordering::Relaxed),
        }
        self.drain();
    }

    /// Piece `i` as parsed (`None`: not a clean piece, so the file is read serially).
    fn offer(&self, i: usize, t: Option<RankTrace>) {
        match (t, self.inbox.lock()) {
            (Some(t), Ok(mut inbox)) => inbox.push((i, t)),
            _ => self.doubt.store(true, Ordering::Relaxed),
        }
        self.drain();
    }

    fn doubted(&self) -> bool {
        self.doubt.load(Ordering::Relaxed)
    }

    /// Merges what is in the inbox unless another thread is merging (it looks again when done).
    fn drain(&self) {
        loop {
            let Ok(mut g) = self.merger.try_lock() else { return };
            let Some(m) = g.as_mut() else { return };
            m.expect_text_bytes(self.expected_text.load(Ordering::Relaxed));
            let batch = self.inbox.lock().map(|mut v| std::mem::take(&mut *v)).unwrap_or_default();
            for (i, t) in batch {
                m.push(i, t);
            }
            if m.doubt() {
                self.doubt.store(true, Ordering::Relaxed);
            }
            drop(g);
            // A piece offered while this thread merged found the merger busy.
            if self.inbox.lock().map_or(true, |v| v.is_empty()) {
                return;
            }
        }
    }

    /// Ends the merge with the whole frame, after every piece was offered.
    fn finish(self, frame: RankTrace, pieces: usize, text_bytes: u64) -> Option<RankTrace> {
        let mut m = self.merger.into_inner().ok()??;
        m.expect_text_bytes(text_bytes);
        for (i, t) in self.inbox.into_inner().ok()? {
            m.push(i, t);
        }
        m.finish(frame, pieces, text_bytes)
    }
}

/// One file on every core (`rankscope_core::parse::split`): the head and tail of the file read
/// by one parser (the frame), the events between cut at verified seams into pieces of about
/// [`PIECE_BYTES`] that `threads` threads (this one included) parse, each merged as soon as the
/// pieces before it are ([`MergeQueue`]), into what the serial parse gives. `None` whenever that
/// is not certain (gzip, a small file, no seam, any diagnostic, `B`/`E` events, …): the caller
/// then parses serially, so damaged input keeps the serial messages.
pub fn read_trace_split(
    path: &Path,
    chunk: usize,
    threads: usize,
    progress: &(dyn Fn(u64) + Sync),
) -> Option<RankTrace> {
    use rankscope_core::parse::{split, TraceParser};
    use std::os::unix::fs::FileExt;
    let name = path.display().to_string();
    let f = std::fs::File::open(path).ok()?;
    let len = f.metadata().ok()?.len();
    let min = env_num("RANKSCOPE_SPLIT_MIN_BYTES").unwrap_or(SPLIT_MIN_BYTES);
    if threads < 2 || len < min.max(2) {
        return None;
    }
    // Plain JSON only: gzip inflates serially, and a BOM or anything else is the serial path's.
    let mut first = [0u8; 64];
    let n = f.read_at(&mut first, 0).ok()?;
    if !matches!(first[..n].iter().find(|b| !b.is_ascii_whitespace()), Some(b'{' | b'[')) {
        return None;
    }
    let block = env_num("RANKSCOPE_CUT_BLOCK_BYTES").unwrap_or(PIECE_BYTES).max(1);
    let mut seams: Vec<(u64, u64)> = Vec::new();
    for c in split::plan_cuts(len, threads as u64, block) {
        let seam = seam_at(&f, c, len)?;
        if seams.last().is_some_and(|&(_, s)| seam.0 <= s) {
            // Cuts closer than the events are long: fewer pieces.
            continue;
        }
        seams.push(seam);
    }
    if seams.len() < 3 {
        return None;
    }
    let (first_seam, last_seam) = (*seams.first()?, *seams.last()?);
    let n_pieces = seams.len() - 1;
    let piece = |i: usize| -> Option<RankTrace> {
        let (from, to) = (seams.get(i)?.1, seams.get(i + 1)?.0);
        let mut p = TraceParser::new(&name);
        p.feed(b"[");
        read_range(&f, from, to, chunk.min(PIECE_READ_BYTES), &mut |b| {
            p.feed(b);
            progress(b.len() as u64);
        })?;
        p.feed(b"]");
        p.finish().ok()
    };
    let queue = MergeQueue::new();
    queue.expected_text.store(len, Ordering::Relaxed);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let work = || loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        if i >= n_pieces || queue.doubted() {
            break;
        }
        queue.offer(i, piece(i));
    };
    let frame = std::thread::scope(|s| {
        for _ in 1..threads {
            s.spawn(work);
        }
        // This thread: the frame's head first (the merge starts from it), then pieces with the
        // others, then the frame's tail.
        let mut p = TraceParser::new(&name);
        let head = read_range(&f, 0, first_seam.1, chunk, &mut |b| p.feed(b))
            .and_then(|()| p.mark())
            .and_then(|mark| split::Merger::new(p.tables(), mark));
        match head {
            Some(m) => queue.install(m),
            None => queue.doubt.store(true, Ordering::Relaxed),
        }
        work();
        read_range(&f, last_seam.1, len, chunk, &mut |b| p.feed(b))?;
        progress(first_seam.1 + (len - last_seam.1));
        p.finish().ok()
    })?;
    let mut t = queue.finish(frame, n_pieces, len)?;
    t.input_bytes = len;
    Some(t)
}

/// A gzip file of at least this many compressed bytes read alone is inflated on one thread and
/// parsed on the others ([`read_trace_cutting`]); Kineto's JSON compresses about 8–15×, so this
/// is about the plain-JSON threshold's text.
fn cut_min_bytes() -> u64 {
    env_num("RANKSCOPE_SPLIT_MIN_BYTES").unwrap_or(SPLIT_MIN_BYTES / 8)
}

/// The cutter's sizes: pieces of [`PIECE_BYTES`] as for plain files (a piece's text is held whole
/// until it is parsed, so a few in flight cost a few blocks), `RANKSCOPE_CUT_BLOCK_BYTES` to
/// change it (tests).
fn cut_sizes() -> rankscope_core::parse::CutSizes {
    let block = env_num("RANKSCOPE_CUT_BLOCK_BYTES").unwrap_or(PIECE_BYTES);
    rankscope_core::parse::CutSizes { block: block as usize, ..Default::default() }
}

/// One gzip file on every core: this thread reads and inflates, and hands the text to
/// `rankscope_core::parse::FileIngest::cutting`, which passes the head and tail to the frame
/// parser and cuts the events between into pieces at seams; `workers` threads parse the pieces
/// while the rest still inflates, and this thread parses a piece itself when they are all busy.
/// Each piece is merged as soon as the pieces before it are ([`MergeQueue`], from the frame's
/// head: `FileIngest::take_merger`). `None` whenever the cut doubts (a diagnostic anywhere,
/// `B`/`E` events, no seam where one was due, …): the caller then reads the file serially, so
/// damaged input keeps the serial path's messages. A file too small to cut comes back whole,
/// exactly as the serial read. With the trace, how many middle pieces it was cut into (0: read
/// whole).
pub fn read_trace_cutting(
    path: &Path,
    chunk: usize,
    workers: usize,
    sizes: rankscope_core::parse::CutSizes,
    progress: &(dyn Fn(u64) + Sync),
) -> Option<Result<(RankTrace, usize), ReadError>> {
    use rankscope_core::parse::{split, Cutout, FileIngest};
    use std::sync::mpsc::TrySendError;
    let name = path.display().to_string();
    // Room for one piece per worker beyond the one it parses: a worker never waits for this
    // thread to inflate the next while this thread parses one.
    let (tx, rx) = std::sync::mpsc::sync_channel::<(usize, Vec<u8>)>(workers.max(1));
    let rx = Mutex::new(rx);
    let queue = MergeQueue::new();
    let file_len = std::fs::metadata(path).map_or(0, |m| m.len());
    let read = std::thread::scope(|s| {
        for _ in 0..workers.max(1) {
            s.spawn(|| loop {
                let next = match rx.lock() {
                    Ok(r) => r.recv(),
                    Err(_) => break,
                };
                let Ok((i, piece)) = next else { break };
                queue.offer(i, split::parse_piece(&name, &piece));
            });
        }
        let read = || -> Result<(Cutout, usize), ReadError> {
            let mut ingest = FileIngest::cutting(&name, sizes);
            let mut pieces = 0usize;
            let mut refused = false;
            read_chunks(path, &name, chunk.min(CUT_READ_BYTES), &mut |b| {
                ingest.feed(b);
                progress(b.len() as u64);
                // The text expected from the compression so far.
                let p = ingest.progress();
                let est = (p.text_bytes as f64 * file_len as f64 / p.input_bytes.max(1) as f64) as u64;
                queue.expected_text.store(est, Ordering::Relaxed);
                if let Some(m) = ingest.take_merger() {
                    queue.install(m);
                }
                for piece in ingest.take_pieces() {
                    match tx.try_send((pieces, piece)) {
                        Ok(()) => {}
                        // Every worker is busy and has its next piece: parse this one here.
                        Err(TrySendError::Full((i, piece))) => {
                            queue.offer(i, split::parse_piece(&name, &piece))
                        }
                        Err(TrySendError::Disconnected(_)) => refused = true,
                    }
                    pieces += 1;
                }
                !refused && !ingest.failed() && !queue.doubted()
            })?;
            if refused || queue.doubted() {
                return Ok((Cutout::Doubt, pieces));
            }
            let cut =
                ingest.finish_cut().map_err(|e| ReadError { message: e.to_string(), not_a_trace: true })?;
            Ok((cut, pieces))
        };
        let r = read();
        drop(tx);
        r
    });
    let (frame, text_bytes, input_bytes, n) = match read {
        Err(e) => return Some(Err(e)),
        Ok((Cutout::Whole(t), _)) => return Some(Ok((t, 0))),
        Ok((Cutout::Doubt, _)) => return None,
        Ok((Cutout::Cut { frame, text_bytes, input_bytes, .. }, n)) => (frame, text_bytes, input_bytes, n),
    };
    let mut t = queue.finish(frame, n, text_bytes)?;
    t.input_bytes = input_bytes;
    Some(Ok((t, n)))
}

fn is_gzip(path: &Path) -> bool {
    let mut magic = [0u8; 2];
    std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut magic)).is_ok() && magic == [0x1f, 0x8b]
}

/// Threads for the work on one host: every core, or `RANKSCOPE_PARSE_THREADS`.
fn parse_threads() -> usize {
    env_num("RANKSCOPE_PARSE_THREADS")
        .map(|n| n.max(1) as usize)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// The core's independent work ([`rankscope_core::join::Join`]) on the host's threads: `b` on a
/// new scoped thread while this one runs `a`, as long as fewer joins' threads run than
/// [`parse_threads`] leaves spare; past that, `b` after `a` on this thread (so joins nested in
/// joins, a rank's passes inside the ranks' map, never start more threads than cores).
#[derive(Debug, Clone, Copy)]
pub struct Threads;

/// Threads started by [`Threads`]' joins and still running.
static JOIN_THREADS: AtomicU64 = AtomicU64::new(0);

impl rankscope_core::join::Join for Threads {
    fn join<A: Send, B: Send>(&self, a: impl FnOnce() -> A + Send, b: impl FnOnce() -> B + Send) -> (A, B) {
        static SPARE: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
        let spare = *SPARE.get_or_init(|| parse_threads().saturating_sub(1) as u64);
        if JOIN_THREADS.fetch_add(1, Ordering::Relaxed) >= spare {
            JOIN_THREADS.fetch_sub(1, Ordering::Relaxed);
            return rankscope_core::join::Serial.join(a, b);
        }
        struct Started;
        impl Drop for Started {
            fn drop(&mut self) {
                JOIN_THREADS.fetch_sub(1, Ordering::Relaxed);
            }
        }
        let _started = Started;
        let r = std::thread::scope(|s| {
            let hb = s.spawn(b);
            let ra = a();
            hb.join().map(|rb| (ra, rb))
        });
        // A panic on the other thread is this call's panic, as with `Serial`.
        r.unwrap_or_else(|e| std::panic::resume_unwind(e))
    }
}

/// Progress of reading: `(bytes done, bytes in all)`, called from the reading threads.
pub type ProgressFn<'a> = &'a (dyn Fn(u64, u64) + Sync);

/// How many cores each file is read on, from the files' sizes: its share of the bytes, rounded,
/// between one and every core. One file alone gets every core, and so does one large trace next
/// to a few small files (a `config.json`, a manifest) that a count of files would have given
/// half; eight like files on two cores get one each.
pub fn core_shares(sizes: &[u64], cores: usize) -> Vec<usize> {
    let cores = cores.max(1);
    let total = sizes.iter().sum::<u64>().max(1) as f64;
    sizes.iter().map(|&len| ((len as f64 * cores as f64 / total).round() as usize).clamp(1, cores)).collect()
}

/// Reads every trace file (in parallel, one thread per core), in the order given. A file found
/// by walking a folder that is not a trace (a `config.json`, a `[{"lr": 0.1}]`) is skipped with
/// a note; a file named explicitly that is not one fails. The largest files are started first,
/// and a file holding more than its share of the bytes is split over as many cores as its share
/// ([`core_shares`]).
pub fn load_traces(
    files: &[Input],
    chunk: usize,
    progress: ProgressFn<'_>,
) -> (Vec<RankTrace>, Vec<FailedFile>, Vec<String>) {
    load_traces_then(files, chunk, progress, &|t, _| t)
}

/// [`load_traces`], each trace handed to `then` on the thread that read it, as soon as it is
/// read (`then(trace, alone)`: `alone` when the file had more than one core, which are then
/// free for `then` to use): what a caller computes per file runs while other files are still
/// being read, with no wait for the slowest file between the stages.
pub fn load_traces_then<T: Send>(
    files: &[Input],
    chunk: usize,
    progress: ProgressFn<'_>,
    then: &(dyn Fn(RankTrace, bool) -> T + Sync),
) -> (Vec<T>, Vec<FailedFile>, Vec<String>) {
    let sizes: Vec<u64> = files.iter().map(|f| std::fs::metadata(&f.path).map_or(0, |m| m.len())).collect();
    let total: u64 = sizes.iter().sum();
    // The bytes read so far; the lock makes each report's count and its call one step, so the
    // caller sees counts that only grow (two threads adding at once could report out of order).
    let done = Mutex::new(0u64);
    let cores = parse_threads();
    let threads = cores.min(files.len()).max(1);
    let shares = core_shares(&sizes, cores);
    // Largest first: the file that takes longest does not start last.
    let mut order: Vec<usize> = (0..files.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(sizes.get(i).copied().unwrap_or(0)));
    let next = AtomicU64::new(0);
    let results: Mutex<Vec<(usize, Result<T, ReadError>)>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let k = next.fetch_add(1, Ordering::Relaxed) as usize;
                let Some(&i) = order.get(k) else { break };
                let Some(input) = files.get(i) else { break };
                let pieces = shares.get(i).copied().unwrap_or(1);
                // What this file has reported, taken back if it is read again serially.
                let mine = AtomicU64::new(0);
                let report = |n: u64| {
                    mine.fetch_add(n, Ordering::Relaxed);
                    if let Ok(mut d) = done.lock() {
                        *d += n;
                        progress(*d, total);
                    }
                };
                let cut = pieces > 1
                    && std::fs::metadata(&input.path)
                        .is_ok_and(|m| m.is_file() && m.len() >= cut_min_bytes())
                    && is_gzip(&input.path);
                let tried = if cut {
                    // This thread inflates and parses when the others are busy: one fewer.
                    let workers = (pieces - 1).max(1);
                    read_trace_cutting(&input.path, chunk, workers, cut_sizes(), &report)
                        .map(|r| r.map(|(t, _)| t))
                } else {
                    read_trace_split(&input.path, chunk, pieces, &report).map(Ok)
                };
                let r = match tried {
                    Some(r) => r,
                    None => {
                        if let Ok(mut d) = done.lock() {
                            *d = d.saturating_sub(mine.swap(0, Ordering::Relaxed));
                        }
                        read_trace(&input.path, chunk, &report)
                    }
                };
                let r = r.map(|t| then(t, pieces > 1));
                if let Ok(mut v) = results.lock() {
                    v.push((i, r));
                }
            });
        }
    });
    let mut results = results.into_inner().unwrap_or_default();
    results.sort_by_key(|(i, _)| *i);
    let mut traces = Vec::new();
    let mut failed = Vec::new();
    let mut notes = Vec::new();
    for (i, r) in results {
        let Some(input) = files.get(i) else { continue };
        match r {
            Ok(t) => traces.push(t),
            Err(ReadError { message, not_a_trace: true }) if input.walked => {
                notes.push(format!("skipped {message}"))
            }
            Err(ReadError { message, .. }) => {
                failed.push(FailedFile { file: input.path.display().to_string(), error: message })
            }
        }
    }
    (traces, failed, notes)
}

/// [`load_traces`], then normalizes them into one job (ranks decided across the files).
pub fn load_job(
    files: &[Input],
    explicit: &[(String, u32)],
    rules: &Rules,
    chunk: usize,
    progress: ProgressFn<'_>,
) -> (Job, Vec<FailedFile>, Vec<String>) {
    let (traces, failed, notes) = load_traces(files, chunk, progress);
    (assemble_with(traces, explicit, rules, &Threads), failed, notes)
}

/// Parses `FILE=N` rank mappings.
pub fn parse_rank_map(items: &[String]) -> Result<Vec<(String, u32)>> {
    items
        .iter()
        .map(|s| {
            let (f, r) = s.rsplit_once('=').with_context(|| format!("--rank expects FILE=N, got `{s}`"))?;
            let r: u32 =
                r.trim().parse().with_context(|| format!("--rank {s}: `{r}` is not a rank number"))?;
            Ok((f.to_string(), r))
        })
        .collect()
}

/// The default rules, with a user rule file in front when given.
pub fn load_rules(path: Option<&Path>) -> Result<Rules> {
    match path {
        None => Ok(Rules::default()),
        Some(p) => {
            let text =
                std::fs::read_to_string(p).with_context(|| format!("cannot read rules {}", p.display()))?;
            Rules::with_user_rules(&text).with_context(|| format!("rules {}", p.display()))
        }
    }
}

/// What a file is, from its first [`job::SNIFF_BYTES`] ([`job::detect`]); a file that cannot
/// be opened is handed to the trace reader, which says why.
pub fn sniff_file(path: &Path) -> InputKind {
    job::detect(&head_of(path))
}

fn head_of(path: &Path) -> Vec<u8> {
    let mut head = vec![0u8; job::SNIFF_BYTES];
    let mut n = 0;
    if let Ok(mut f) = std::fs::File::open(path) {
        while n < head.len() {
            match f.read(&mut head[n..]) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
    }
    head.truncate(n);
    head
}

/// Explicit `FILE=N` rank mappings.
pub type RankMap = Vec<(String, u32)>;

/// The inputs every trace command shares: files from paths, explicit ranks, rules. A `--rank`
/// naming no input file is an error (it would otherwise be ignored in silence).
pub fn inputs(
    paths: &[PathBuf],
    rank: &[String],
    rules: Option<&Path>,
    notes: &mut Vec<String>,
) -> Result<(Vec<Input>, RankMap, Rules)> {
    let files = expand(paths, notes)?;
    if files.is_empty() {
        anyhow::bail!("no input files (.json, .json.gz, .log, .txt, .out or Flight Recorder dumps) under the given paths");
    }
    let map = parse_rank_map(rank)?;
    for (f, r) in &map {
        // The core matches a mapping to a file by its whole name or a trailing path part (a
        // rank of a file that holds several is `FILE (rank K)`).
        let f = &rankscope_core::normalize::multirank::file_of(f).to_string();
        let hit = files.iter().any(|i| {
            let s = i.path.display().to_string();
            s == *f || s.ends_with(&format!("/{f}"))
        });
        anyhow::ensure!(hit, "--rank {f}={r}: no input file is called `{f}`");
    }
    Ok((files, map, load_rules(rules)?))
}

/// A whole analysis from paths: what `rankscope analyze` and `rankscope.analyze()` run.
#[derive(Debug, Default)]
pub struct Request {
    /// Files and folders (folders walked as [`expand`] says).
    pub paths: Vec<PathBuf>,
    /// `FILE=N` explicit ranks.
    pub ranks: Vec<String>,
    /// Extra classification rules (a JSON file).
    pub rules: Option<PathBuf>,
    pub options: rankscope_core::analyze::Options,
    /// Read size (default 4 MiB).
    pub chunk: Option<usize>,
    /// Keep the normalized job ([`Outcome::job`]) for exports that write every rank's events
    /// (`--merged-trace`, `--perfetto`). Without it each trace is normalized and analysed on the
    /// thread that read it, as soon as it is read, and dropped: the same outputs, sooner (no
    /// stage waits for the slowest file) and in less memory.
    pub keep_job: bool,
}

/// What [`analyze_paths`] gives: the normalized job (for exports, when [`Request::keep_job`]),
/// the outputs, and the notes a shell shows (files skipped, NCCL logs that only the NCCL report
/// reads).
#[derive(Debug)]
pub struct Outcome {
    pub job: Option<Job>,
    pub out: JobOutput,
    pub notes: Vec<String>,
}

/// Reads every input by kind and runs the job: traces in parallel, each analysed into its part
/// where it was read ([`job::part_of_with`], then [`job::combine`]; [`job::analyze_traces`]
/// when the job is kept), NCCL text and Flight Recorder dumps whole (kB to MB). Errors are for usage (no
/// input, a `--rank` naming no file, unreadable rules); a file that cannot be read is in
/// `out.failed`.
pub fn analyze_paths(req: &Request, progress: ProgressFn<'_>) -> Result<Outcome> {
    let mut notes = Vec::new();
    let (files, explicit, rules) = inputs(&req.paths, &req.ranks, req.rules.as_deref(), &mut notes)?;
    let mut traces = Vec::new();
    let mut texts: Vec<Text> = Vec::new();
    let mut failed = Vec::new();
    for f in files {
        let head = head_of(&f.path);
        let kinds = job::text_kinds(&head);
        if kinds.is_empty() {
            traces.push(f);
            continue;
        }
        let name = f.path.display().to_string();
        match std::fs::read(&f.path) {
            Ok(bytes) => {
                if kinds == [job::InputKind::NcclLog] {
                    notes.push(job::nccl_log_note(&name));
                }
                texts.push(Text { name, kinds, bytes })
            }
            Err(e) => {
                failed.push(FailedFile { file: name.clone(), error: format!("{name}: cannot read: {e}") })
            }
        }
    }
    // A job digest is the whole job, its analysis as `combine` stored it.
    let refs: Vec<TextRef<'_>> = texts.iter().map(Text::as_ref).collect();
    if let Some(d) = job::digest_among(&refs, traces.len() + failed.len()) {
        let d = d.map_err(anyhow::Error::msg)?;
        notes.extend(job::digest_note(&req.options, !req.ranks.is_empty()).map(String::from));
        let out = d.into_output();
        let job = req.keep_job.then(|| assemble(Vec::new(), &[], &rules));
        return Ok(Outcome { job, out, notes });
    }
    let chunk = req.chunk.unwrap_or(4 << 20);
    let refs: Vec<TextRef<'_>> = texts.iter().map(Text::as_ref).collect();
    // With one thread (`RANKSCOPE_PARSE_THREADS=1`) `Threads` runs everything in line.
    let (job, mut out) = if req.keep_job {
        let (mut traces, trace_failed, more) = load_traces(&traces, chunk, progress);
        notes.extend(more);
        failed.extend(trace_failed);
        let claims: Vec<RankClaim> = traces.iter().map(job::claim_of).collect();
        let facts: Vec<_> = traces
            .iter()
            .zip(&claims)
            .map(|(t, c)| (c, t.events.len() as u64, t.meta.distributed.as_ref().and_then(|d| d.world_size)))
            .collect();
        for i in job::eventless(&facts).into_iter().rev() {
            notes.push(job::eventless_note(&traces.remove(i).source));
        }
        let (job, out) = job::analyze_traces_with(traces, &explicit, &rules, &refs, &req.options, &Threads);
        (Some(job), out)
    } else {
        // Each file's part on the thread that read it (the app's workers do the same), its
        // rank decided and stamped with every file's claim in hand (`job::combine`). A file
        // that had every core has them for its part too; the others leave the cores to the
        // files still being read.
        let part = |t: RankTrace, alone: bool| {
            if alone {
                job::part_of_with(t, &rules, &req.options, &Threads)
            } else {
                job::part_of_with(t, &rules, &req.options, &rankscope_core::join::Serial)
            }
        };
        let (parts, trace_failed, more) = load_traces_then(&traces, chunk, progress, &part);
        notes.extend(more);
        failed.extend(trace_failed);
        let mut parts: Vec<(RankClaim, RankPart)> = parts.into_iter().flatten().collect();
        drop_eventless(&mut parts, &mut notes);
        (None, job::combine(parts, &explicit, &refs, &req.options))
    };
    out.failed = failed;
    Ok(Outcome { job, out, notes })
}

/// Leaves out the parts [`job::eventless`] names, each with its note.
pub fn drop_eventless(parts: &mut Vec<(RankClaim, RankPart)>, notes: &mut Vec<String>) {
    let facts: Vec<_> = parts.iter().map(|(c, p)| (c, p.info.events, p.world_size)).collect();
    for i in job::eventless(&facts).into_iter().rev() {
        notes.push(job::eventless_note(&parts.remove(i).0.file));
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use rankscope_core::parse::CutSizes;
    use std::io::Write;

    /// Cores go by bytes, not by files: one large trace beside a small manifest is split over
    /// every core, like files one core each, and a big file among smaller ones gets its share.
    #[test]
    fn cores_are_shared_by_bytes() {
        assert_eq!(core_shares(&[405 << 20], 2), vec![2]);
        assert_eq!(core_shares(&[405 << 20, 2 << 20], 2), vec![2, 1]);
        assert_eq!(core_shares(&[34 << 20; 8], 2), vec![1; 8]);
        assert_eq!(core_shares(&[300, 50, 50], 8), vec![6, 1, 1]);
        assert_eq!(core_shares(&[0, 0], 4), vec![1, 1]);
        assert_eq!(core_shares(&[], 4), Vec::<usize>::new());
    }

    /// Each file's part computed on the thread that read it, ranks decided after (`keep_job:
    /// false`), is the job normalized whole (`keep_job: true`, what the exports need): the same
    /// analysis, report, failed files and notes, with a file claiming a taken rank, a file named
    /// by `--rank`, a damaged file and a folder's non-trace JSON among the inputs.
    #[test]
    fn parts_read_where_they_are_read_are_the_whole_jobs_analysis() {
        let cfg = rankscope_synth::SynthConfig {
            ranks: 4,
            steps: 4,
            straggler_rank: Some(2),
            ..Default::default()
        };
        let dir = std::env::temp_dir().join(format!("rankscope-host-parts-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for rank in 0..4 {
            let mut text = Vec::new();
            rankscope_synth::write_rank(&cfg, rank, &mut text).unwrap();
            std::fs::write(dir.join(format!("rank{rank}.json")), &text).unwrap();
            if rank == 1 {
                // Rank 1 again under another name, and cut short in a third file.
                std::fs::write(dir.join("again.json"), &text).unwrap();
                std::fs::write(dir.join("cut.json"), &text[..text.len() * 2 / 3]).unwrap();
            }
        }
        std::fs::write(dir.join("config.json"), br#"{"lr": 0.1}"#).unwrap();
        for ranks in [vec![], vec!["again.json=7".to_string()]] {
            let run = |keep_job: bool| {
                let req = Request {
                    paths: vec![dir.clone()],
                    ranks: ranks.clone(),
                    keep_job,
                    ..Default::default()
                };
                analyze_paths(&req, &|_, _| {}).unwrap()
            };
            let (whole, parts) = (run(true), run(false));
            assert!(whole.job.is_some() && parts.job.is_none());
            assert_eq!(whole.out.analysis.ranks.len(), 6, "{ranks:?}");
            assert_eq!(parts.out.json(), whole.out.json(), "{ranks:?}");
            assert_eq!(parts.out.markdown(), whole.out.markdown(), "{ranks:?}");
            assert_eq!(format!("{:?}", parts.out.failed), format!("{:?}", whole.out.failed));
            assert_eq!(parts.notes, whole.notes);
            assert!(parts.notes.iter().any(|n| n.contains("config.json")), "{:?}", parts.notes);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The gzip path on every core: the pieces are parsed on worker threads, in whatever order
    /// they finish, and the merged trace is the serial read's, table for table.
    #[test]
    fn a_gzip_file_cut_on_worker_threads_reads_as_the_serial_read() {
        let cfg = rankscope_synth::SynthConfig {
            ranks: 2,
            steps: 3,
            straggler_rank: Some(1),
            ..Default::default()
        };
        let mut text = Vec::new();
        rankscope_synth::write_rank(&cfg, 1, &mut text).unwrap();
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(&text).unwrap();
        let dir = std::env::temp_dir().join(format!("rankscope-host-cut-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let gz = dir.join("rank1.json.gz");
        std::fs::write(&gz, e.finish().unwrap()).unwrap();
        let serial = read_trace(&gz, 1 << 16, &|_| {}).unwrap();
        let sizes = CutSizes { head: 64 << 10, block: 96 << 10, keep: 64 << 10 };
        for workers in [1, 2, 3] {
            let (t, pieces) = read_trace_cutting(&gz, 1 << 16, workers, sizes, &|_| {}).unwrap().unwrap();
            assert!(pieces >= 8, "{} text bytes cut into only {pieces} pieces", text.len());
            assert_eq!(format!("{t:?}"), format!("{serial:?}"), "{workers} workers");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
