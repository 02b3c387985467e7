//! One gzip file on every core: inflated on one thread, its text cut into pieces that the
//! other threads parse, merged in file order ([`read_trace_cutting`]).

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Mutex;

use rankscope_core::model::RankTrace;

use super::env_num;
use super::merge::MergeQueue;
use super::read::{read_chunks, ReadError};
use super::split::{PIECE_BYTES, SPLIT_MIN_BYTES};

/// Compressed bytes read at a time when cutting gzip: the pieces cut from one read wait until it
/// is inflated, and Kineto's JSON inflates 8–15×, so 4 MiB reads held about 50 MB of pieces
/// back (and the workers idle) before handing them on.
const CUT_READ_BYTES: usize = 256 << 10;

/// A gzip file of at least this many compressed bytes read alone is inflated on one thread and
/// parsed on the others ([`read_trace_cutting`]); Kineto's JSON compresses about 8–15×, so this
/// is about the plain-JSON threshold's text.
pub(crate) fn cut_min_bytes() -> u64 {
    env_num("RANKSCOPE_SPLIT_MIN_BYTES").unwrap_or(SPLIT_MIN_BYTES / 8)
}

/// The cutter's sizes: pieces of [`PIECE_BYTES`] as for plain files (a piece's text is held whole
/// until it is parsed, so a few in flight cost a few blocks), `RANKSCOPE_CUT_BLOCK_BYTES` to
/// change it (tests).
pub(crate) fn cut_sizes() -> rankscope_core::parse::CutSizes {
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

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::read::read_trace;
    use rankscope_core::parse::CutSizes;
    use std::io::Write;

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
