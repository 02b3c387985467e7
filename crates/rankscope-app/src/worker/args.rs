//! Each event's source `args`, read when first asked for: a load parses without them (no args
//! arena beside the tables: on a 304 MB trace the CLI's peak is 102 MB without and 204 MB with,
//! and a file keeps its pieces on every worker), and the first trace export or args-panel
//! question about a file reads it again alone with `FileIngest::keep_args`
//! ([`super::ingest::read_again`]), normalizes it as the load did and moves the args arena into
//! the views held ([`RankView::adopt_source_args`]); later questions answer from them at once.

use std::cell::RefCell;
use std::rc::Rc;

use rankscope_core::normalize::Rules;
use rankscope_core::view::RankView;

use super::ingest::read_again;
use super::{ranks::rank_views, yield_task, State};
use crate::protocol::{FileId, RankId};

/// Whether rank `id`'s view needs its file read again for its source args (a file whose bytes
/// cannot be had again, a host page's stream, never does: it is written without them).
pub(super) fn wanted(state: &Rc<RefCell<State>>, id: RankId) -> bool {
    let st = state.borrow();
    st.sources.contains_key(&id.file) && st.ranks.get(&id).is_some_and(|v| !v.has_source_args())
}

/// Makes the views of `file` hold their source args: reads it again (one read at a time per
/// file: a second question waits for the first read) and moves the args in.
pub(super) async fn ensure(state: &Rc<RefCell<State>>, file: FileId) -> Result<(), String> {
    while state.borrow().rereading.contains(&file) {
        yield_task().await;
    }
    let all_held =
        state.borrow().ranks.iter().filter(|(k, _)| k.file == file).all(|(_, v)| v.has_source_args());
    if all_held {
        return Ok(());
    }
    let Some(from) = state.borrow().sources.get(&file).cloned() else {
        return Err("this file cannot be read again (a host page's stream)".into());
    };
    state.borrow_mut().rereading.insert(file);
    let read = read_again(state, file, &from).await;
    let result = read.and_then(|trace| adopt(state, file, trace));
    state.borrow_mut().rereading.remove(&file);
    result
}

/// Moves the args of `trace` (the file read again) into the views held, rank by rank.
fn adopt(
    state: &Rc<RefCell<State>>,
    file: FileId,
    trace: rankscope_core::model::RankTrace,
) -> Result<(), String> {
    let rules = Rules::default();
    let (_, views) = rank_views(trace, &rules);
    for (index, (_, mut again)) in (0u32..).zip(views) {
        let mut st = state.borrow_mut();
        let Some(held) = st.ranks.get_mut(&RankId { file, index }) else { continue };
        if !held.has_source_args() && !RankView::adopt_source_args(held, &mut again) {
            return Err(
                "the file read again holds other events than when it was loaded (was it changed on disk?)"
                    .into(),
            );
        }
    }
    Ok(())
}
