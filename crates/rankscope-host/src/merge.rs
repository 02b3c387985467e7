//! The merge of a file's middle pieces in file order as they are parsed, on the parsing threads
//! ([`MergeQueue`]), shared by the plain-file split and the gzip cut.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use rankscope_core::model::RankTrace;

/// Middle pieces merged in file order as they are parsed ([`rankscope_core::parse::Merger`]):
/// a thread that parsed a piece offers it, and whichever thread finds the merger free appends
/// every piece that is due. The merge runs on the parsing threads between pieces instead of after
/// them all, no thread waits for another's merging, and a piece is dropped once merged.
pub(crate) struct MergeQueue {
    inbox: Mutex<Vec<(usize, RankTrace)>>,
    merger: Mutex<Option<rankscope_core::parse::Merger>>,
    pub(crate) doubt: std::sync::atomic::AtomicBool,
    /// The file's text length as far as known ([`rankscope_core::parse::Merger::expect_text_bytes`]).
    pub(crate) expected_text: AtomicU64,
}

impl MergeQueue {
    pub(crate) fn new() -> Self {
        MergeQueue {
            inbox: Mutex::new(Vec::new()),
            merger: Mutex::new(None),
            doubt: Default::default(),
            expected_text: AtomicU64::new(0),
        }
    }

    /// The merger, started from the frame's head; pieces offered before it wait in the inbox.
    pub(crate) fn install(&self, m: rankscope_core::parse::Merger) {
        match self.merger.lock() {
            Ok(mut g) => *g = Some(m),
            Err(_) => self.doubt.store(true, Ordering::Relaxed),
        }
        self.drain();
    }

    /// Piece `i` as parsed (`None`: not a clean piece, so the file is read serially).
    pub(crate) fn offer(&self, i: usize, t: Option<RankTrace>) {
        match (t, self.inbox.lock()) {
            (Some(t), Ok(mut inbox)) => inbox.push((i, t)),
            _ => self.doubt.store(true, Ordering::Relaxed),
        }
        self.drain();
    }

    pub(crate) fn doubted(&self) -> bool {
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
    pub(crate) fn finish(self, frame: RankTrace, pieces: usize, text_bytes: u64) -> Option<RankTrace> {
        let mut m = self.merger.into_inner().ok()??;
        m.expect_text_bytes(text_bytes);
        for (i, t) in self.inbox.into_inner().ok()? {
            m.push(i, t);
        }
        m.finish(frame, pieces, text_bytes)
    }
}
