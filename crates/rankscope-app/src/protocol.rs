//! The messages between the UI (main thread) and the workers.
//!
//! Each worker holds the ranks it read (their full tables, a [`RankView`] each) and answers small
//! questions about them; only summaries, tiles and event details cross. A message is JSON text
//! (serde_json: `i64` nanoseconds stay exact, which a JS number would not keep) posted as the
//! first element of a JS array; a `Load` carries the `File` object as the second element
//! (structured clone of the handle: the bytes are read inside the worker by `File.slice()`).
//!
//! ```text
//! worker → UI   Ready                          once its wasm is running (the pool queues until then)
//! UI → worker   Load {file, name, helpers} + File  read, ingest, cut into its ranks, normalize;
//!               keep a RankView per rank (helpers > 0: a large file alone; it is cut into
//!               pieces the others parse)
//!               Demo {file, rank}              generate the demo rank, then the same as Load
//! worker → UI   Progress {file, phase, bytes…} at most every PROGRESS_MS while reading
//!               Text {file, kinds} + Uint8Array  not a trace but NCCL text (an NCCL_DEBUG log,
//!               nccl-tests output), recognised by content: its bytes, for the job's Fabric
//!               Loaded {id, of, claim, summary, part}  one per rank the file holds (`of` of
//!               them, ids {file, 0..of}): its claim, RankSummary (a few kB) and analysis part
//!               Failed {file, error}           not a trace at all / unreadable; the rest go on
//! UI → worker   Cancel {file}                  stop reading after the current chunk
//! worker → UI   Cancelled {file}
//! UI → worker   Ask {id, req, query}           a question about a loaded rank ([`Query`])
//! worker → UI   Answer {id, req, answer}       its answer ([`Answer`]), with the same `req`
//! UI → worker   Baseline {name} + File         a baseline to compare the job with (a worker
//!               of its own, `baseline.rs`): a job digest or a saved `rankscope analyze --json`
//! worker → UI   Baseline {name, error} + Uint8Array  its analysis's JSON (or why it is none)
//! ```
//!
//! **A file holds one rank or several.** A Perfetto/Chrome merge of a job (one process per rank)
//! or rankscope's own merged export is cut into its ranks by the core, after the pieces of a
//! file read on several workers are merged, exactly as `rankscope analyze` cuts it
//! (`normalize::multirank::split`); each rank is then a [`RankId`] (its file and its place in
//! the file) and named as the CLI names it (`FILE (rank N)`, `multirank::part_name`). A file of
//! one rank is `{file, 0}`.
//!
//! One large file on every worker (see `worker/`): its reader cuts the `traceEvents` array at
//! event starts (`parse::split`) and hands pieces on; the UI relays each to another worker,
//! which parses it and sends its columns back as bytes (`parse::wire`) to merge:
//!
//! ```text
//! reader → UI     Piece {file, index} + Uint8Array     a piece of text (transferred)
//!                 Piece {file, index, range} + File    or, of a plain file, where it lies
//! UI → helper     Parse {file, index, range?} + …      the same piece (the helper reads a range)
//! helper → UI     Parsed {file, index, ok} + Uint8Array  its columns (ok false: it doubts)
//! UI → reader     Parsed {file, index, ok} + Uint8Array  the same, to merge
//! ```
//!
//! Every question about a loaded rank is one [`Query`] arm, answered by [`Answer`]s carrying its
//! request id: the pool keeps the reply of each pending request (see `pool.rs`) and fails it if
//! the worker holding the rank's file dies. Questions: `Tile` (level-of-detail boxes of one lane over one
//! tile), `Pick` (what is under the pointer), `Search` (events whose name contains the query: how
//! many, and where the first [`SEARCH_LIMIT`] are drawn), `Export` (this rank's piece of the merged
//! Chrome trace, as the job's export plan says: under the job's rank for it, on its offset) and `Perfetto` (its member of the Perfetto archive, which names its rank), both
//! with every event's source args (the file read again for them on the first such question), and
//! answered by `Chunk`s of ≤ [`CHUNK_BYTES`] whose bytes are transferred beside the message,
//! never a JS string; `Args` (one event's detail with its source args, for the args panel,
//! answered `Picked`: the file read again for them on the first such question) and `Totals`
//! (per name and class, the events of some lanes overlapping a range of the rank's own clock:
//! the timeline's area selection, [`crate::totals`]) and `Memory` (one tile of the memory
//! track: a device's least and most allocated per pixel, `rankscope_core::view::memory`) and
//! `MemorySpan` (the same over a range, per device: the area selection's memory reading). A worker never learns the job's rank decision: the rank is a key the page
//! keeps, and the questions that write a rank carry it.
//!
//! A `Load` may carry a `ReadableStream` instead of the `File` (a host page's stream, see
//! `embed`): it is transferred, and read the same way.
//!
//! [`RankView`]: rankscope_core::view::RankView

use rankscope_core::analyze::RankPart;
use rankscope_core::view::memory::{MemoryTile, MemoryTileKey};
use rankscope_core::view::{EventDetail, Found, RankClaim, RankSummary, Tile, TileKey};
use serde::{Deserialize, Serialize};

/// A file of the current job: its position in load order.
pub type FileId = u32;

/// A rank a worker holds: the file it was read from and its place among the ranks that file
/// holds, in the order the core cuts them (`normalize::multirank::split`); `index` is 0 for a
/// file of one rank. The job's rank number is not in it: the page decides that across files.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct RankId {
    pub file: FileId,
    pub index: u32,
}

impl RankId {
    /// The one rank of a file of one rank.
    pub fn whole(file: FileId) -> RankId {
        RankId { file, index: 0 }
    }
}

/// Bytes handed to the parser at a time: stream chunks are gathered up to this size.
pub const CHUNK_BYTES: usize = 4 << 20;
/// Most search matches of one rank the timeline is told where to draw.
pub const SEARCH_LIMIT: usize = 20_000;
/// Least time between two progress messages of one file.
pub const PROGRESS_MS: f64 = 100.0;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ToWorker {
    /// `helpers`: how many other workers may parse pieces of this file (0: read it alone).
    Load {
        file: FileId,
        name: String,
        #[serde(default)]
        helpers: u32,
    },
    /// A piece of another worker's file to parse; its text beside the message, or with `range`
    /// the `File` itself, of which the piece is bytes `[from, to)` (read here).
    Parse {
        file: FileId,
        index: u32,
        #[serde(default)]
        range: Option<(u64, u64)>,
    },
    /// A piece of this worker's file, parsed elsewhere: its columns beside the message
    /// (`ok` false: the piece could not be parsed alone, so the file is read serially).
    Parsed {
        file: FileId,
        index: u32,
        ok: bool,
    },
    Demo {
        file: FileId,
        rank: u32,
    },
    /// Run a load's whole path once on a small synthetic job, then answer [`FromWorker::Warmed`]
    /// (`warm.rs`): the engine's optimising compiler has the hot code ready before a real load.
    Warm,
    /// A baseline to compare the job with, its `File` beside the message (`baseline.rs`).
    Baseline {
        name: String,
    },
    Cancel {
        file: FileId,
    },
    Ask {
        id: RankId,
        req: u32,
        query: Query,
    },
}

/// A question about one loaded rank, for the worker holding its file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Query {
    Tile {
        key: TileKey,
    },
    Pick {
        lane: u32,
        depth: u32,
        t_ns: i64,
        slop_ns: i64,
    },
    Search {
        query: String,
    },
    Export {
        planned: Box<rankscope_core::export::Planned>,
        origin_ns: i64,
        first: bool,
    },
    Perfetto {
        member: Box<rankscope_core::export::perfetto::Member>,
        shift_ns: i64,
    },
    Args {
        event: u32,
    },
    /// Where event row `event` is drawn, with its detail: a collective's member on another rank,
    /// selected from the args panel (`Answer::Placed`).
    Place {
        event: u32,
    },
    Totals {
        from_ns: i64,
        to_ns: i64,
        lanes: Vec<u32>,
    },
    Memory {
        key: MemoryTileKey,
    },
    /// Each device's least and most allocated and most reserved over a range of the rank's own
    /// clock (the area selection's memory reading, `Answer::MemorySpan`).
    MemorySpan {
        from_ns: i64,
        to_ns: i64,
    },
    /// This rank's piece of the `events` table (`rankscope export`, docs/columnar.md) in
    /// `format`, under the job's `rank` for it, on its `offset_ns` (`Answer::Piece`); with
    /// `redact`, its names replaced by the tokens of that key phrase (`--redact-key`).
    Table {
        format: rankscope_core::export::columnar::Format,
        rank: u32,
        offset_ns: i64,
        redact: Option<String>,
    },
}

/// What a worker answers a [`Query`] with. Every answer but a `Chunk` that is not the last ends
/// the request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Answer {
    Tile(Box<Tile>),
    Picked(Option<Box<EventDetail>>),
    Placed(Option<Box<(rankscope_core::view::Hit, EventDetail)>>),
    Found(Box<Found>),
    Totals(Box<crate::totals::Totals>),
    Memory(Box<MemoryTile>),
    MemorySpan(Vec<rankscope_core::view::memory::MemorySpan>),
    /// A piece of an export; its bytes (a `Uint8Array`) travel beside the message.
    Chunk {
        last: bool,
    },
    /// A piece of a columnar table: what the file's footer says of it and the table's schema;
    /// its bytes (a `Uint8Array`) travel beside the message.
    /// Redacted, `ledger` is what this rank's redaction kept, hashed and removed (the tar's
    /// `redaction.json` is the statement of every rank's ledger and the tab's together).
    Piece {
        meta: Box<rankscope_core::export::columnar::PieceMeta>,
        schema: Box<rankscope_core::export::columnar::Schema>,
        #[serde(default)]
        ledger: Option<Box<rankscope_core::redact::Ledger>>,
    },
    /// The question could not be answered: the rank is not loaded here, or the export failed.
    Failed(String),
}

impl Answer {
    /// Whether this answer ends its request.
    pub fn is_final(&self) -> bool {
        !matches!(self, Answer::Chunk { last: false })
    }
}

/// What a file is from its first [`SNIFF_BYTES`] ([`rankscope_core::job::text_kinds`], the
/// rule `rankscope analyze` uses): the text kinds found in it, none for a trace.
pub use rankscope_core::job::{text_kinds as sniff, InputKind, SNIFF_BYTES};

/// Where a file's load is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Phase {
    Reading,
    Normalizing,
}

/// What a worker says. `Text` is NCCL text or a dump, its bytes beside the message; `Digest` a
/// job digest decoded in the worker ([`rankscope_core::job::digest::decode`], then
/// [`rankscope_core::job::JobDigest::lean`]), so the page parses only what it shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum FromWorker {
    Ready,
    /// `workers`: how many workers parse this file (more than one: it is read in pieces).
    Progress {
        file: FileId,
        phase: Phase,
        input_bytes: u64,
        text_bytes: u64,
        events: u64,
        #[serde(default = "one")]
        workers: u32,
    },
    Text {
        file: FileId,
        kinds: Vec<InputKind>,
    },
    /// A job digest, its parts read lean; the stored analysis's JSON travels beside it as a
    /// transferred `Uint8Array` (`LeanDigest::analysis_json`), parsed once, on the page.
    Digest {
        file: FileId,
        digest: Box<rankscope_core::job::digest::LeanDigest>,
    },
    /// One rank of a file that holds `of` ranks (their `id.index` is 0..of, posted in order:
    /// the file is read once the last is in). `claim` is what the rank says of its number (for
    /// a rank cut from a file of several, the rank the file gives it), for the job's decision.
    Loaded {
        id: RankId,
        of: u32,
        claim: RankClaim,
        summary: Box<RankSummary>,
        part: Box<RankPart>,
        first_ns: Option<i64>,
    },
    Failed {
        file: FileId,
        error: String,
    },
    Cancelled {
        file: FileId,
    },
    Answer {
        id: RankId,
        req: u32,
        answer: Answer,
    },
    /// A piece of the file this worker reads, for another worker to parse: its text beside it,
    /// or with `range` the `File`, of which the piece is bytes `[from, to)`.
    Piece {
        file: FileId,
        index: u32,
        #[serde(default)]
        range: Option<(u64, u64)>,
    },
    /// A piece parsed for another worker: its columns beside it, or nothing when `ok` is false.
    Parsed {
        file: FileId,
        index: u32,
        ok: bool,
    },
    /// The warm-up is done (its ranks came as `Loaded` before it), in `ms`.
    Warmed {
        ms: f64,
    },
    /// A baseline's analysis, as the JSON it is stored as, beside the message (a transferred
    /// `Uint8Array`, parsed once, on the page); `error`: why the file is not a baseline.
    Baseline {
        name: String,
        error: Option<String>,
    },
}

fn one() -> u32 {
    1
}

/// Encodes a message (serde_json cannot fail on these types; an empty string is ignored by the
/// receiver rather than trusted).
pub fn encode<T: Serialize>(m: &T) -> String {
    serde_json::to_string(m).unwrap_or_default()
}

pub fn decode<'a, T: Deserialize<'a>>(s: &'a str) -> Result<T, String> {
    // From bytes, as baselines and digests are read: one `serde_json` reader gives every type
    // one deserializer in the wasm (the message types share most of theirs with the analysis').
    serde_json::from_slice(s.as_bytes()).map_err(|e| format!("bad message: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_with_exact_nanoseconds() {
        let key = TileKey { lane: 3, level: 12, index: 1_716_404_512_093_771_204 / (256 << 12) };
        let m = ToWorker::Ask {
            id: RankId { file: 2, index: 63 },
            req: 9,
            query: Query::Pick { lane: 3, depth: 1, t_ns: 1_716_404_512_093_771_205, slop_ns: 40 },
        };
        assert_eq!(decode::<ToWorker>(&encode(&m)), Ok(m));
        let t = FromWorker::Answer {
            id: RankId::whole(1),
            req: 4,
            answer: Answer::Tile(Box::new(Tile { key, start_ns: vec![i64::MAX - 1], ..Tile::default() })),
        };
        assert_eq!(decode::<FromWorker>(&encode(&t)), Ok(t));
        let key = MemoryTileKey { device: -1, level: 12, index: key.index };
        let bucket = rankscope_core::view::memory::MemoryBucket {
            t_ns: 1_716_404_512_093_771_205,
            min: 1,
            max: i64::MAX,
            reserved_max: None,
        };
        let m = FromWorker::Answer {
            id: RankId::whole(0),
            req: 5,
            answer: Answer::Memory(Box::new(MemoryTile { key, buckets: vec![bucket] })),
        };
        assert_eq!(decode::<FromWorker>(&encode(&m)), Ok(m));
        assert!(Answer::Chunk { last: true }.is_final() && !Answer::Chunk { last: false }.is_final());
        assert!(decode::<FromWorker>("{").is_err());
    }

    #[test]
    fn files_are_told_apart_by_content() {
        let none: [InputKind; 0] = [];
        assert_eq!(sniff(b"  {\"traceEvents\": []}"), none);
        assert_eq!(sniff(&[0x1f, 0x8b, 8, 0]), none);
        assert_eq!(
            sniff(b"host:1:2 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"),
            [InputKind::NcclLog]
        );
        let tests = b"# nThread 1 nGpus 1 minBytes 8 maxBytes 128 step: 2(factor) warmup iters: 5 iters: 20\n\
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n";
        assert_eq!(sniff(tests), [InputKind::NcclTests]);
        assert_eq!(sniff(b"hello"), none);
    }
}
