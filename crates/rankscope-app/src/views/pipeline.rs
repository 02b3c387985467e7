//! Pipeline: the stages of a pipeline-parallel job, each stage's step split into compute, the
//! wait in its blocking receives and the rest of its bubble, against the schedule's formula;
//! the per stage × step table; the point-to-point links between stages.
//!
//! Bars are SVG with CSS classes (`seg-*` in `www/style.css`; the CSP allows no inline style).

use rankscope_core::analyze::pipeline::PipelineReport;
use yew::prelude::*;

use crate::format;
use crate::state::JobView;
use crate::tokens::{HEAT_CELL_H, HEAT_LABEL_W, HEAT_WIDTH};

#[derive(Properties, PartialEq, Debug)]
pub struct Props {
    pub job: std::rc::Rc<JobView>,
}

fn pct(x: f64) -> String {
    format!("{:.1}%", 100.0 * x)
}

/// One bar per stage: compute, recv wait, the rest of the bubble; a mark at the formula's share.
fn bars(p: &PipelineReport) -> Html {
    let bar_w = HEAT_WIDTH - HEAT_LABEL_W - 10.0;
    let h = 8.0 + HEAT_CELL_H * p.per_stage.len() as f64;
    let theory = p.theory_bubble_share;
    let rows = p.per_stage.iter().enumerate().map(|(i, s)| {
        let y = 4.0 + i as f64 * HEAT_CELL_H;
        let span = s.span_ns.max(1) as f64;
        let other = (s.bubble_ns - s.recv_wait_ns).max(0);
        let parts: [(&str, &str, i64); 3] = [
            ("compute", "compute", s.compute_ns.min(s.span_ns)),
            ("wait", "waiting in receives", s.recv_wait_ns.min(s.bubble_ns).max(0)),
            ("idle", "the rest of the bubble (sends, bookkeeping, idle)", other),
        ];
        let mut x = HEAT_LABEL_W;
        let segs = parts
            .iter()
            .map(|(class, what, v)| {
                let w = bar_w * (*v).max(0) as f64 / span;
                let r = html! {
                    <rect class={classes!("seg", format!("seg-{class}"))} x={format!("{x:.1}")} y={format!("{y:.1}")}
                        width={format!("{:.1}", w.max(0.0))} height={format!("{:.1}", HEAT_CELL_H - 4.0)}>
                        <title>{format!("stage {} (rank {}) · {what}: {} per step ({:.1}%)", s.stage, s.rank, format::duration(*v as f64), 100.0 * *v as f64 / span)}</title>
                    </rect>
                };
                x += w;
                r
            })
            .collect::<Html>();
        // The formula's bubble, measured from the right end of the bar.
        let mark = theory.map(|t| {
            let mx = HEAT_LABEL_W + bar_w * (1.0 - t);
            html! { <line class="theory-mark" x1={format!("{mx:.1}")} x2={format!("{mx:.1}")} y1={format!("{:.1}", y - 1.0)} y2={format!("{:.1}", y + HEAT_CELL_H - 3.0)}>
                <title>{format!("the schedule's bubble (p − 1)/(m + p − 1) = {}", pct(t))}</title></line> }
        });
        html! {
            <g data-testid="stage-bar" data-stage={s.stage.to_string()} data-rank={s.rank.to_string()}
                data-bubble-share={format!("{:.4}", s.bubble_share)}>
                <text class="axis" x={format!("{:.1}", HEAT_LABEL_W - 6.0)} y={format!("{:.1}", y + (HEAT_CELL_H - 4.0) / 2.0)}
                    text-anchor="end" dominant-baseline="middle">{format!("stage {} · r{}", s.stage, s.rank)}</text>
                { segs }
                { for mark }
            </g>
        }
    });
    html! {
        <svg class="bars" data-testid="stage-bars" width={format!("{HEAT_WIDTH:.0}")} height={format!("{h:.0}")}
            viewBox={format!("0 0 {HEAT_WIDTH:.0} {h:.0}")} role="img" aria-label="Each stage's step: compute and bubble">
            { for rows }
        </svg>
    }
}

#[function_component(Pipeline)]
pub fn pipeline(p: &Props) -> Html {
    let Some(pl) = &p.job.analysis.pipeline else {
        return html! {
            <section class="pipeline" data-testid="pipeline">
                <p class="muted" data-testid="no-pipeline">{"No pipeline parallelism in these traces: no chain of ranks exchanging sends and receives, and no Forward i / Backward i stage annotations."}</p>
            </section>
        };
    };
    let chain = pl.stages.iter().map(|r| r.to_string()).collect::<Vec<_>>().join(" → ");
    let head = format!(
        "{} stages (ranks {chain}), schedule {}{}, {} micro-batches per step{}.",
        pl.stages.len(),
        pl.schedule.name(),
        pl.virtual_stages.map(|v| format!(" with {v} virtual stages per rank")).unwrap_or_default(),
        pl.micro_batches.map_or("?".into(), |m| m.to_string()),
        match (pl.theory_bubble_share, pl.theory_bubble_share_2m) {
            (Some(t), Some(t2)) => format!(
                "; the schedule's bubble (p − 1)/(m + p − 1) is {}, {} with twice the micro-batches",
                pct(t),
                pct(t2)
            ),
            (Some(t), None) => format!("; the schedule's bubble (p − 1)/(m + p − 1) is {}", pct(t)),
            _ => String::new(),
        }
    );
    html! {
        <section class="pipeline" data-testid="pipeline">
            <p data-testid="pipeline-head">{head}</p>
            <h2>{"Each stage's step (mean over steps)"}</h2>
            <div class="legend">
                <span class="legend-item"><span class="swatch sw-compute"></span>{"compute"}</span>
                <span class="legend-item"><span class="swatch sw-wait"></span>{"waiting in receives"}</span>
                <span class="legend-item"><span class="swatch sw-idle"></span>{"the rest of the bubble"}</span>
                if pl.theory_bubble_share.is_some() { <span class="legend-item muted">{"| the schedule's bubble, from the right"}</span> }
            </div>
            { bars(pl) }
            <table class="stages" data-testid="stage-table">
                <thead><tr>
                    <th class="num">{"Stage"}</th><th class="num">{"Rank"}</th><th class="num">{"Span"}</th>
                    <th class="num">{"Compute"}</th><th class="num">{"Bubble"}</th><th class="num">{"Bubble share"}</th>
                    <th class="num">{"Recv wait"}</th><th class="num">{"Micro-batches"}</th>
                </tr></thead>
                <tbody>
                { for pl.per_stage.iter().map(|s| html! {
                    <tr data-testid="stage-row" data-stage={s.stage.to_string()}
                        class={classes!((pl.slowest_stage == Some(s.stage)).then_some("named"))}>
                        <td class="num">{s.stage}{if pl.slowest_stage == Some(s.stage) { " (slowest)" } else { "" }}</td>
                        <td class="num">{s.rank}</td>
                        <td class="num">{format::duration(s.span_ns as f64)}</td>
                        <td class="num">{format::duration(s.compute_ns as f64)}</td>
                        <td class="num">{format::duration(s.bubble_ns as f64)}</td>
                        <td class="num" data-testid="bubble-share">{pct(s.bubble_share)}</td>
                        <td class="num">{format::duration(s.recv_wait_ns as f64)}</td>
                        <td class="num">{s.micro_batches.map_or("–".into(), |m| m.to_string())}</td>
                    </tr>
                }) }
                </tbody>
            </table>
            if !pl.links.is_empty() {
                <h2>{"Point-to-point links"}</h2>
                <table class="links" data-testid="p2p-links">
                    <thead><tr>
                        <th>{"From → to"}</th><th class="num">{"Matched"}</th><th class="num">{"Unmatched sends"}</th>
                        <th class="num">{"Unmatched recvs"}</th><th class="num">{"Size mismatches"}</th>
                        <th class="num">{"Message"}</th><th class="num">{"Peers inferred"}</th>
                    </tr></thead>
                    <tbody>
                    { for pl.links.iter().map(|l| html! {
                        <tr data-testid="p2p-link">
                            <td>{format!("{} → {}", l.src, l.dst)}</td>
                            <td class="num">{l.matched}</td>
                            <td class="num">{l.unmatched_sends}</td>
                            <td class="num">{l.unmatched_recvs}</td>
                            <td class="num">{l.size_mismatches}</td>
                            <td class="num">{l.bytes.map_or("–".into(), |b| format::bytes(b.max(0) as u64))}</td>
                            <td class="num">{l.peers_inferred}</td>
                        </tr>
                    }) }
                    </tbody>
                </table>
            }
        </section>
    }
}
