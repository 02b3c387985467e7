//! The warm-up (the page's `warm.rs`): a load's whole path run once on a small synthetic job.

use std::cell::RefCell;
use std::rc::Rc;

use js_sys::{Array, Uint8Array};
use rankscope_core::parse::{split, wire};
use rankscope_synth::{self as synth, SynthConfig};

use super::ingest::{read_file, Source};
use super::{now_ms, post, ranks, State};
use crate::protocol::*;

/// Text of each synthetic rank of the warm-up: about 90,000 events, enough for V8 to optimise
/// most functions a load spends its time in (a function is compiled again with the optimising
/// tier once it has run for a while), and about 0.4 s for both ranks on one core of the bench
/// machine (8 × 34 MB chosen after it: ready in 0.71-0.78 s; with 12 MiB ranks 0.80-0.82 s).
const WARM_BYTES: u64 = 24 << 20;

/// The warm-up (`warm.rs`): a load's whole path run on two small synthetic ranks: each made a
/// `File` and read as a chosen file is (`read_file`: slices, the chunked parse, progress), a
/// middle piece parsed alone and sent through the wire as a helper's is, then `finish` (the
/// normalization, the summary, the analysis part, the `Loaded` message: the page's warm-up
/// combines the parts, for its own module). Then `Warmed`. The worker yields between slices, and
/// the page closes it when a real load starts.
pub(super) async fn warm() {
    let t0 = now_ms();
    let cfg = SynthConfig {
        ranks: 2,
        straggler_rank: Some(1),
        target_bytes: Some(WARM_BYTES),
        ..SynthConfig::default()
    };
    let state = Rc::new(RefCell::new(State::default()));
    for rank in 0..cfg.ranks {
        let mut bytes = Vec::new();
        if synth::write_rank(&cfg, rank, &mut bytes).is_err() {
            break;
        }
        let len = bytes.len() as u64;
        let seam = |at: u64| bytes.get(at as usize..).and_then(|w| split::seam_in(w, at));
        if let (Some(a), Some(b)) = (seam(len / 3), seam(2 * len / 3)) {
            let piece = bytes.get(a.1 as usize..b.0 as usize).and_then(|p| split::parse_piece("warm-up", p));
            if let Some(w) = piece.as_ref().and_then(wire::encode_piece) {
                drop(wire::decode_piece("warm-up", &w));
            }
        }
        let name = synth::file_name(rank, false);
        let parts = Array::of1(&Uint8Array::from(&bytes[..]));
        drop(bytes);
        let Ok(file) = web_sys::File::new_with_u8_array_sequence(&parts, &name) else { break };
        let result = read_file(&state, rank, &name, Source::file(&file), 0).await;
        ranks::finish(&state, rank, result);
        state.borrow_mut().ranks.clear();
    }
    post(&FromWorker::Warmed { ms: now_ms() - t0 });
}
