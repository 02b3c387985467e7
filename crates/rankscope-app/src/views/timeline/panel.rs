//! The args panel: what a click on an event opens under the canvas. Its name, class, rank and
//! lane; its start as time into its step ("step 12 + 3.214 ms") and on the aligned clock (from
//! the job's first event, the merged trace's time 0); its duration; every source arg, verbatim
//! (asked of the worker holding the rank, `Query::Args`: the file is read again for them on the
//! first click, `worker::args`); and links to its step and its launch / kernel.

use rankscope_core::view::summary::StepSpan;
use rankscope_core::view::EventDetail;
use yew::prelude::*;

use crate::format;
use crate::protocol::RankId;
use crate::state::JobView;

/// Values longer than this are shortened in the panel; the whole value is one click away.
pub(super) const LONG_VALUE: usize = 96;

/// Where an event starts, in words: `step 12 + 3.214 ms` into the step that holds `start_ns`
/// (or the step it belongs to by `step`, when given and known), else before the first step /
/// after the last one. `steps` are the rank's, on its own clock.
pub(super) fn relative_words(start_ns: i64, step: Option<u32>, steps: &[StepSpan]) -> String {
    let owner = step
        .and_then(|s| steps.iter().find(|x| x.step == s))
        .or_else(|| steps.iter().find(|x| x.start_ns <= start_ns && start_ns < x.end_ns));
    if let Some(s) = owner {
        let d = start_ns.saturating_sub(s.start_ns);
        let sign = if d < 0 { "−" } else { "+" };
        return format!("step {} {sign} {}", s.step, format::duration(d.unsigned_abs() as f64));
    }
    match (steps.first(), steps.last()) {
        (Some(f), _) if start_ns < f.start_ns => {
            format!("{} before step {}", format::duration(f.start_ns.saturating_sub(start_ns) as f64), f.step)
        }
        (_, Some(l)) => {
            format!("{} after step {}", format::duration(start_ns.saturating_sub(l.end_ns) as f64), l.step)
        }
        _ => "no step (the rank has none)".into(),
    }
}

/// The source args object's members as `(key, value)` texts, in the source's order (a value
/// that is not a string is its JSON text). `None`: not an object.
pub(super) fn arg_pairs(text: &str) -> Option<Vec<(String, String)>> {
    if text.trim().is_empty() {
        return Some(Vec::new());
    }
    let Ordered(pairs) = serde_json::from_str(text).ok()?;
    Some(
        pairs
            .into_iter()
            .map(|(k, v)| (k, v.as_str().map_or_else(|| v.to_string(), str::to_string)))
            .collect(),
    )
}

/// An object's members in the order they are written (`serde_json::Map` sorts its keys).
struct Ordered(Vec<(String, serde_json::Value)>);

impl<'de> serde::Deserialize<'de> for Ordered {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Members;
        impl<'de> serde::de::Visitor<'de> for Members {
            type Value = Ordered;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<Ordered, A::Error> {
                let mut out = Vec::new();
                while let Some(kv) = m.next_entry::<String, serde_json::Value>()? {
                    out.push(kv);
                }
                Ok(Ordered(out))
            }
        }
        d.deserialize_map(Members)
    }
}

/// `v` cut to [`LONG_VALUE`] characters with an ellipsis, or `None` when it is short.
pub(super) fn shortened(v: &str) -> Option<String> {
    (v.chars().count() > LONG_VALUE).then(|| format!("{}…", v.chars().take(LONG_VALUE).collect::<String>()))
}

/// What the panel shows: the clicked event, its place, and its source args once they came.
#[derive(Clone, PartialEq)]
pub(super) struct Selected {
    pub id: RankId,
    pub lane: u32,
    pub detail: EventDetail,
    /// The detail with its source args (`Query::Args`), or why there is none; `None`: asked.
    pub full: Option<Result<EventDetail, String>>,
}

/// The panel (see the module doc); `on_show(start, end)` moves the view to a window of the
/// rank's own clock (the timeline shifts it); `extra` goes under the links (the pin button and
/// the collective's members, [`super::members::list`]).
pub(super) fn panel(job: &JobView, s: &Selected, on_show: Callback<(RankId, i64, i64)>, extra: Html) -> Html {
    let d = &s.detail;
    let summary = job.ranks.iter().find(|(k, _)| *k == s.id).map(|(_, r)| r.clone());
    let rank = summary.as_ref().map_or_else(|| "?".into(), |r| r.rank.to_string());
    let lane = summary
        .as_ref()
        .and_then(|r| r.lanes.iter().find(|l| l.lane == s.lane).map(|l| l.label.clone()))
        .unwrap_or_else(|| format!("lane {}", s.lane));
    let steps: &[StepSpan] = summary.as_ref().map_or(&[], |r| &r.steps);
    let aligned = d.start_ns.saturating_sub(job.offset(s.id)).saturating_sub(job.origin_ns);
    let step_window = d.step.and_then(|n| steps.iter().find(|x| x.step == n)).map(|x| (x.start_ns, x.end_ns));
    let show = |a: i64, b: i64| {
        let (on_show, id) = (on_show.clone(), s.id);
        Callback::from(move |_: MouseEvent| on_show.emit((id, a, b)))
    };
    html! {
        <aside class="selection args-panel" data-testid="args-panel" data-event={d.event.to_string()}
            data-rank={rank.clone()} data-start-ns={d.start_ns.to_string()}>
            <div class="args-head">
                <strong data-testid="args-name">{d.name.clone()}</strong>
                <span class="muted">{format!(" · {} · rank {rank} · {lane}", d.class.replace('_', " "))}</span>
            </div>
            <dl class="args-facts">
                <dt>{"start"}</dt>
                <dd data-testid="args-relative">{relative_words(d.start_ns, d.step, steps)}</dd>
                <dt>{"aligned"}</dt>
                <dd data-testid="args-aligned" title={format!("{} ns on the rank's own clock", d.start_ns)}>
                    {format!("{} from the job's first event", format::duration(aligned as f64))}</dd>
                <dt>{"duration"}</dt>
                <dd data-testid="args-duration">{if d.instant { "instant".to_string() } else { format::duration(d.dur_ns as f64) }}</dd>
                if let Some(l) = &d.launch { <dt>{"launched by"}</dt><dd>{l.clone()}</dd> }
            </dl>
            <div class="args-links">
                if let (Some(n), Some((a, b))) = (d.step, step_window) {
                    <button class="small" data-testid="args-step" onclick={show(a, b)}>{format!("Step {n}")}</button>
                }
                if let Some(l) = &d.link {
                    <button class="small" data-testid="args-flow" onclick={show(l.place.start_ns, l.place.end_ns.max(l.place.start_ns + 1))}
                        title="Show the other end of its launch → kernel flow (correlation id)">
                        { if d.gpu { format!("Its launch: {}", l.name) } else { format!("Its kernel: {}", l.name) } }
                    </button>
                }
            </div>
            { extra }
            { source_args(s) }
        </aside>
    }
}

/// The source args: asked, failed, none, or each as a row (a long value shortened, whole in a
/// `<details>` under it).
fn source_args(s: &Selected) -> Html {
    let full = match &s.full {
        None => return html! { <p class="muted" data-testid="args-loading">{"reading the source args…"}</p> },
        Some(Err(e)) => {
            return html! { <p class="error" data-testid="args-error">{format!("source args: {e}")}</p> }
        }
        Some(Ok(d)) => d,
    };
    let mut rows: Vec<(String, String)> = Vec::new();
    let source = full.source_args.as_deref().map(arg_pairs);
    match &source {
        Some(Some(pairs)) => rows.extend(pairs.iter().cloned()),
        Some(None) => rows.push(("(args)".into(), full.source_args.clone().unwrap_or_default())),
        None => rows.extend(full.args.iter().cloned()),
    }
    let note = match source {
        None => {
            "the source args are not held (a stream from a host page cannot be read again): rankscope's own"
        }
        Some(_) if rows.is_empty() => "the event has no args",
        Some(_) => "",
    };
    html! {
        <div class="args-table-wrap">
            if !note.is_empty() { <p class="muted" data-testid="args-note">{note}</p> }
            <table class="args-table" data-testid="args-table">
                { for rows.iter().map(|(k, v)| html! {
                    <tr data-testid="arg" data-key={k.clone()}>
                        <th>{k.clone()}</th>
                        <td data-value={v.clone()}>{
                            match shortened(v) {
                                Some(short) => html! { <details><summary>{short}</summary><pre>{v.clone()}</pre></details> },
                                None => html! { {v.clone()} },
                            }
                        }</td>
                    </tr>
                }) }
            </table>
        </div>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn steps() -> Vec<StepSpan> {
        vec![
            StepSpan { step: 11, start_ns: 1_000_000, end_ns: 5_000_000 },
            StepSpan { step: 12, start_ns: 5_000_000, end_ns: 9_000_000 },
        ]
    }

    #[test]
    fn relative_words_name_the_step_and_the_time_into_it() {
        let s = steps();
        assert_eq!(
            relative_words(8_214_000, None, &s),
            format!("step 12 + {}", format::duration(3_214_000.0))
        );
        // The step the event belongs to wins over the one its start falls in.
        assert_eq!(
            relative_words(4_999_000, Some(12), &s),
            format!("step 12 − {}", format::duration(1_000.0))
        );
        assert_eq!(
            relative_words(500_000, None, &s),
            format!("{} before step 11", format::duration(500_000.0))
        );
        assert_eq!(
            relative_words(9_500_000, None, &s),
            format!("{} after step 12", format::duration(500_000.0))
        );
        assert_eq!(relative_words(1, None, &[]), "no step (the rank has none)");
    }

    #[test]
    fn arg_pairs_keep_the_source_order_and_values() {
        let p = arg_pairs(r#"{"Input Dims": [[2, 3]], "b": "x", "a": 1.50}"#)
            .unwrap_or_else(|| panic!("an object"));
        assert_eq!(
            p,
            vec![
                ("Input Dims".into(), "[[2,3]]".into()),
                ("b".into(), "x".into()),
                ("a".into(), "1.5".into())
            ]
        );
        assert_eq!(arg_pairs(""), Some(vec![]));
        assert_eq!(arg_pairs("[1]"), None);
        assert_eq!(arg_pairs("{"), None);
    }

    #[test]
    fn long_values_are_shortened() {
        assert_eq!(shortened("short"), None);
        let long = "é".repeat(LONG_VALUE + 5);
        let s = shortened(&long).unwrap_or_else(|| panic!("a long value is shortened"));
        assert_eq!(s.chars().count(), LONG_VALUE + 1);
    }
}
