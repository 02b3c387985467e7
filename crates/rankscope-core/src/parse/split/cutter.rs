//! The cutter: text fed as it arrives (inflated gzip) cut into the frame's head and tail and
//! middle pieces at seams ([`Cutter`]).

use super::{find_seam, SEAM_OVERLAP, SEAM_SEARCH};

/// Sizes a [`Cutter`] works with (text bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CutSizes {
    /// Text handed straight to the frame before the first seam is looked for (the top-level
    /// members before `traceEvents` and its first events).
    pub head: usize,
    /// About how long a piece is.
    pub block: usize,
    /// Text always held back for the frame's tail: the end of `traceEvents` (where Kineto
    /// writes its `M` metadata, which a middle piece must not hold) and the members after it.
    pub keep: usize,
}

impl Default for CutSizes {
    fn default() -> Self {
        // 8 MiB pieces: a few thousand events each, few enough that merging is cheap and small
        // enough that a handful in flight cost little memory.
        CutSizes { head: 1 << 20, block: 8 << 20, keep: 1 << 20 }
    }
}

/// What a [`Cutter`] hands on, in text order.
#[derive(Debug, PartialEq, Eq)]
pub enum Cut<'a> {
    /// Text for the frame parser (the head, then at the end the tail).
    Frame(&'a [u8]),
    /// The frame has had the head: take its [`Mark`] now. The receiver answers whether it could;
    /// if not, the cutter tries the next seam, and when none within its window will do, hands
    /// everything on as frame text, so the frame parse is the serial parse.
    Mark,
    /// A middle piece: events from one event start to the end of another, to be parsed alone
    /// as `[` piece `]`.
    Piece(Vec<u8>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Before the first seam.
    Head,
    /// Cutting pieces.
    Middle,
    /// Not cutting: everything is frame text (no seam after the head, or no mark).
    Serial,
    /// A piece could not be ended (no seam within four blocks) after others were handed on: the
    /// text must be parsed serially from the start.
    Failed,
}

/// The same cut as a host with the file at hand makes (see the module doc), for text that
/// arrives as a stream: gzip inflating, a pipe, a browser's `File.stream()`. It holds at most
/// about one block plus [`CutSizes::keep`] of text; pieces go to the caller as they are cut, so
/// they can be parsed while the rest still inflates.
#[derive(Debug)]
pub struct Cutter {
    sizes: CutSizes,
    /// Text bytes fed so far.
    seen: u64,
    pending: Vec<u8>,
    /// `pending[..searched]` holds no seam past the block (only while cutting).
    searched: usize,
    phase: Phase,
    pieces: u64,
}

impl Cutter {
    pub fn new(sizes: CutSizes) -> Self {
        let sizes = CutSizes { block: sizes.block.max(1), ..sizes };
        Cutter { sizes, seen: 0, pending: Vec::new(), searched: 0, phase: Phase::Head, pieces: 0 }
    }

    /// Text bytes fed so far.
    pub fn text_bytes(&self) -> u64 {
        self.seen
    }

    /// Pieces handed on so far.
    pub fn pieces(&self) -> u64 {
        self.pieces
    }

    /// Whether cutting failed after pieces were handed on (the caller must parse serially).
    pub fn failed(&self) -> bool {
        self.phase == Phase::Failed
    }

    /// Whether the frame parse is the whole parse (nothing was cut; taking a mark changes
    /// nothing in a parse).
    pub fn whole(&self) -> bool {
        self.pieces == 0 && self.phase != Phase::Failed
    }

    /// Feeds the next text bytes.
    pub fn feed(&mut self, mut text: &[u8], out: &mut dyn FnMut(Cut<'_>) -> bool) {
        let before = self.seen;
        self.seen += text.len() as u64;
        match self.phase {
            Phase::Serial => {
                out(Cut::Frame(text));
            }
            Phase::Failed => {}
            Phase::Head => {
                // The first `head` bytes go straight through; what follows waits for a seam.
                let direct = (self.sizes.head as u64).saturating_sub(before).min(text.len() as u64) as usize;
                if direct > 0 {
                    out(Cut::Frame(&text[..direct]));
                    text = &text[direct..];
                }
                self.pending.extend_from_slice(text);
                if self.pending.len() >= self.search() {
                    self.first_seam(out);
                }
            }
            Phase::Middle => {
                self.pending.extend_from_slice(text);
                self.cut(out);
            }
        }
    }

    /// Ends the text: what is held is the frame's tail.
    pub fn finish(&mut self, out: &mut dyn FnMut(Cut<'_>) -> bool) {
        if matches!(self.phase, Phase::Head | Phase::Middle) && !self.pending.is_empty() {
            out(Cut::Frame(&self.pending));
        }
        self.pending = Vec::new();
    }

    /// The first seam after the head where the frame can be marked: a seam inside the
    /// metadata before `traceEvents` (`deviceProperties` is an array of objects) cannot be, so
    /// the next one is tried, within the search window.
    fn first_seam(&mut self, out: &mut dyn FnMut(Cut<'_>) -> bool) {
        let mut left = self.search();
        loop {
            let window = self.pending.len().min(left);
            let Some((_, start)) = find_seam(&self.pending[..window]) else {
                self.go_serial(out);
                return;
            };
            out(Cut::Frame(&self.pending[..start]));
            self.pending.drain(..start);
            left -= start;
            if out(Cut::Mark) {
                break;
            }
        }
        self.phase = Phase::Middle;
        self.searched = 0;
        self.cut(out);
    }

    /// How far after the head the first seam is looked for.
    fn search(&self) -> usize {
        SEAM_SEARCH.min(self.sizes.block)
    }

    fn go_serial(&mut self, out: &mut dyn FnMut(Cut<'_>) -> bool) {
        out(Cut::Frame(&self.pending));
        self.pending = Vec::new();
        self.phase = Phase::Serial;
    }

    /// Cuts pieces while more than a block and the kept tail are held.
    fn cut(&mut self, out: &mut dyn FnMut(Cut<'_>) -> bool) {
        let CutSizes { block, keep, .. } = self.sizes;
        while self.pending.len() >= block.saturating_add(keep) {
            // A seam may straddle the end of what was searched: look again from a little before.
            let from = block.max(self.searched.saturating_sub(SEAM_OVERLAP));
            let end_at = self.pending.len() - keep;
            let Some((end, start)) = find_seam(&self.pending[from..end_at]) else {
                self.searched = end_at;
                if self.pending.len() > block.saturating_mul(4).saturating_add(keep) {
                    if self.pieces == 0 {
                        // Nothing cut yet: the frame can still read it all.
                        self.go_serial(out);
                    } else {
                        self.phase = Phase::Failed;
                        self.pending = Vec::new();
                    }
                }
                return;
            };
            let piece = self.pending[..from + end].to_vec();
            self.pending.drain(..from + start);
            self.searched = 0;
            self.pieces += 1;
            out(Cut::Piece(piece));
        }
    }
}
