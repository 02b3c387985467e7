//! Fabric: what lies beneath the trace, from NCCL_DEBUG logs (`rankscope nccl`) and nccl-tests
//! output (`rankscope nccl-tests`) dropped with the traces: the ranks (host, device, NCCL
//! version, network, GPUDirect RDMA), the findings with their evidence lines, bus bandwidth
//! against message size per test (log x axis) with the fitted latency–bandwidth model over the
//! points, and, with traces, the trace's collectives placed against the fabric.

use std::rc::Rc;

use rankscope_core::nccl::log::{LogReport, NcclProcess};
use rankscope_core::nccl::perf::PerfTest;
use rankscope_core::nccl::{Finding, Severity};
use yew::prelude::*;

use crate::format;
use crate::state::JobView;
use crate::tokens::{CHART_H, CHART_PAD, CHART_W};

#[derive(Properties, PartialEq, Debug)]
pub struct Props {
    pub job: Rc<JobView>,
}

fn sev(s: Severity) -> &'static str {
    s.nccl_name()
}

fn process<'a>(logs: &'a LogReport, host: &str, pid: u64) -> Option<&'a NcclProcess> {
    logs.processes.iter().find(|p| p.host == host && p.pid == pid)
}

fn network(p: Option<&NcclProcess>) -> String {
    let Some(p) = p else { return "–".into() };
    let mut s = p.network.clone().unwrap_or_else(|| "?".into());
    if let Some(plugin) = &p.net_plugin {
        s.push_str(&format!(" ({plugin})"));
    }
    if !p.ib_devices.is_empty() {
        s.push_str(&format!(" · {}", p.ib_devices.join(", ")));
    } else if !p.socket_interfaces.is_empty() {
        s.push_str(&format!(" · {}", p.socket_interfaces.join(", ")));
    }
    s
}

/// The NCCL version of a process, or of its host when the process line did not say.
fn version(logs: &LogReport, p: Option<&NcclProcess>, host: &str) -> String {
    p.and_then(|p| p.nccl_version.clone())
        .or_else(|| {
            logs.nccl_versions
                .iter()
                .find(|(_, hosts)| hosts.iter().any(|h| h == host))
                .map(|(v, _)| v.clone())
        })
        .unwrap_or_else(|| "–".into())
}

/// Ranks at most this many get a peer transport matrix (a bigger one is unreadable).
const MATRIX_MAX_RANKS: u32 = 32;

/// Which transport each rank uses to reach each peer (`P2P/IPC`, `SHM`, `NET/IB`, ...), from
/// the `Channel NN : a -> b via ...` lines, one matrix per communicator size.
fn peer_matrix(logs: &LogReport) -> Html {
    let n = logs.peers.iter().map(|p| p.from_rank.max(p.to_rank) + 1).max().unwrap_or(0);
    if n == 0 {
        return html! {};
    }
    if n > MATRIX_MAX_RANKS {
        return html! { <p class="muted">{format!("{n} ranks: the peer transport matrix is shown up to {MATRIX_MAX_RANKS}.")}</p> };
    }
    let cell = |from: u32, to: u32| -> Vec<String> {
        let mut t: Vec<String> = logs
            .peers
            .iter()
            .filter(|p| p.from_rank == from && p.to_rank == to)
            .flat_map(|p| p.transports.iter().cloned())
            .collect();
        t.sort();
        t.dedup();
        t
    };
    let family = |t: &[String]| -> &'static str {
        match t.first().map(String::as_str) {
            None => "none",
            Some(x) if x.starts_with("P2P") => "p2p",
            Some(x) if x.starts_with("SHM") => "shm",
            Some(x) if x.starts_with("NET") || x.starts_with("COLLNET") => "net",
            Some(_) => "other",
        }
    };
    html! {
        <table class="peer-matrix" data-testid="peer-matrix">
            <thead><tr><th>{"from \\ to"}</th>{ for (0..n).map(|t| html! { <th class="num">{t}</th> }) }</tr></thead>
            <tbody>{ for (0..n).map(|f| html! {
                <tr><th class="num">{f}</th>{ for (0..n).map(|t| {
                    let tr = cell(f, t);
                    html! { <td class={classes!("peer", format!("peer-{}", family(&tr)))} title={tr.join(", ")}>{tr.join(" ")}</td> }
                }) }</tr>
            }) }</tbody>
        </table>
    }
}

fn ranks_table(logs: &LogReport) -> Html {
    let gdr = |p: Option<&NcclProcess>| match p.and_then(|p| p.gdr) {
        Some(true) => "on",
        Some(false) => "off",
        None => "–",
    };
    let rows: Html = if logs.ranks.is_empty() {
        // No rank lines: one row per process.
        logs.processes
            .iter()
            .map(|p| {
                html! {
                    <tr data-testid="fabric-rank">
                        <td class="num">{p.launcher_rank.map(|r| r.to_string()).unwrap_or_else(|| "–".into())}</td>
                        <td>{"–"}</td>
                        <td>{format!("{}:{}", p.host, p.pid)}</td>
                        <td>{p.cuda_dev.map(|d| format!("cuda {d}")).unwrap_or_else(|| "–".into())}</td>
                        <td>{version(logs, Some(p), &p.host)}</td>
                        <td>{network(Some(p))}</td>
                        <td>{gdr(Some(p))}</td>
                    </tr>
                }
            })
            .collect()
    } else {
        logs.ranks
            .iter()
            .map(|r| {
                let p = process(logs, &r.host, r.pid);
                html! {
                    <tr data-testid="fabric-rank" data-rank={r.rank.to_string()} data-host={r.host.clone()}>
                        <td class="num">{r.rank}{r.nranks.map(|n| format!(" / {n}")).unwrap_or_default()}</td>
                        <td class="name" title={r.comm.clone()}>{r.comm.clone()}</td>
                        <td>{format!("{}:{}", r.host, r.pid)}</td>
                        <td>{format!("{}{}",
                            r.cuda_dev.map(|d| format!("cuda {d}")).unwrap_or_else(|| "–".into()),
                            r.bus_id.as_ref().map(|b| format!(" · {b}")).unwrap_or_default())}</td>
                        <td>{version(logs, p, &r.host)}</td>
                        <td>{network(p)}</td>
                        <td>{gdr(p)}</td>
                    </tr>
                }
            })
            .collect()
    };
    html! {
        <table class="fabric-ranks" data-testid="fabric-ranks">
            <thead><tr>
                <th class="num">{"Rank"}</th><th>{"Communicator"}</th><th>{"Host:pid"}</th><th>{"Device"}</th>
                <th>{"NCCL"}</th><th>{"Network"}</th><th>{"GDRDMA"}</th>
            </tr></thead>
            <tbody>{rows}</tbody>
        </table>
    }
}

fn finding(f: &Finding) -> Html {
    let s = sev(f.severity);
    html! {
        <li class={classes!("finding", format!("finding-{}", if s == "error" { "high" } else if s == "warning" { "medium" } else { "low" }))}
            data-testid="fabric-finding" data-id={f.id.as_str()}>
            <div class="finding-head">
                <span class={classes!("sev", format!("sev-{s}"))}>{s}</span>
                <span class="finding-message">{f.message.clone()}</span>
            </div>
            <div class="finding-fix"><strong>{"Fix: "}</strong>{f.fix.clone()}</div>
            <ul class="evidence">
                { for f.quotes.iter().take(3).map(|e| html! {
                    <li><code>{format!("{}:{}", e.file.rsplit('/').next().unwrap_or(&e.file), e.line)}</code>{" "}<code class="line">{e.text.clone()}</code></li>
                }) }
                if f.quotes_total as usize > f.quotes.len().min(3) {
                    <li class="muted">{format!("… {} evidence lines in all", f.quotes_total)}</li>
                }
            </ul>
        </li>
    }
}

/// `2^e` bytes as nccl-tests sizes read: `256 B`, `4 KiB`, `16 MiB`, `4 GiB`.
fn pow2_label(e: i64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let e = e.max(0);
    let u = ((e / 10) as usize).min(units.len() - 1);
    format!("{} {}", 1u64 << (e - 10 * u as i64), units[u])
}

/// A y tick with as many decimals as the scale needs.
fn tick_label(v: f64, max: f64) -> String {
    if max >= 20.0 {
        format!("{v:.0}")
    } else if max >= 2.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// Bus bandwidth against message size (log x axis), out-of-place and in-place points, and the
/// fitted model `busbw(S) = factor × S / (α + S / B)`.
fn chart(t: &PerfTest) -> Html {
    let name = t.collective_name();
    let pts: Vec<(f64, f64, f64)> = t
        .rows
        .iter()
        .filter(|r| r.size_bytes > 0)
        .map(|r| (r.size_bytes as f64, r.out_of_place.busbw_gbps, r.in_place.busbw_gbps))
        .collect();
    if pts.is_empty() {
        return html! {
            <figure class="chart" data-testid="fabric-chart" data-collective={name} data-points="0">
                <figcaption>{format!("{name} · {}: no result rows", t.file)}</figcaption>
            </figure>
        };
    }
    let fit = t.analysis.as_ref().and_then(|a| a.fit.as_ref());
    let model = |s: f64| {
        fit.map(|f| {
            let us = f.alpha_us + s / (f.bw_alg_gbps * 1e3);
            f.busbw_factor.unwrap_or(1.0) * s / us / 1e3
        })
    };
    let (xmin, xmax) = pts.iter().fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.0), b.max(p.0)));
    let (lx0, lx1) = (xmin.log2().floor(), xmax.log2().ceil().max(xmin.log2().floor() + 1.0));
    let ymax = pts
        .iter()
        .flat_map(|p| [p.1, p.2])
        .chain(pts.iter().filter_map(|p| model(p.0)))
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max)
        .max(1e-3)
        * 1.1;
    let (w, h, pad) = (CHART_W, CHART_H, CHART_PAD);
    let x = |s: f64| pad + (s.log2() - lx0) / (lx1 - lx0) * (w - pad - 12.0);
    let y = |v: f64| h - 28.0 - (v / ymax) * (h - 28.0 - 12.0);
    let dots = |k: usize, class: &'static str| -> Html {
        pts.iter()
            .map(|p| {
                let v = if k == 0 { p.1 } else { p.2 };
                html! { <circle class={class} cx={format!("{:.1}", x(p.0))} cy={format!("{:.1}", y(v))} r="3">
                    <title>{format!("{} · busbw {v:.2} GB/s ({})", format::bytes(p.0 as u64), if k == 0 { "out of place" } else { "in place" })}</title>
                </circle> }
            })
            .collect()
    };
    let line = fit.map(|_| {
        let n = 80;
        let d: Vec<String> = (0..=n)
            .filter_map(|i| {
                let l = lx0 + (lx1 - lx0) * i as f64 / n as f64;
                let s = l.exp2();
                model(s).filter(|v| v.is_finite()).map(|v| format!("{:.1},{:.1}", x(s), y(v.min(ymax))))
            })
            .collect();
        html! { <polyline class="fit" points={d.join(" ")} /> }
    });
    // Axis ticks: powers of 4 bytes on x, 4 steps on y.
    let xticks = (lx0 as i64..=lx1 as i64).filter(|e| e % 4 == 0 || lx1 - lx0 <= 8.0).map(|e| {
        let s = (e as f64).exp2();
        html! { <>
            <line class="grid" x1={format!("{:.1}", x(s))} x2={format!("{:.1}", x(s))} y1="12" y2={format!("{:.1}", h - 28.0)} />
            <text class="axis" x={format!("{:.1}", x(s))} y={format!("{:.1}", h - 14.0)} text-anchor="middle">{pow2_label(e)}</text>
        </> }
    });
    let yticks = (0..=4).map(|i| {
        let v = ymax / 1.1 * i as f64 / 4.0;
        html! { <>
            <line class="grid" x1={format!("{pad:.1}")} x2={format!("{:.1}", w - 12.0)} y1={format!("{:.1}", y(v))} y2={format!("{:.1}", y(v))} />
            <text class="axis" x={format!("{:.1}", pad - 6.0)} y={format!("{:.1}", y(v))} text-anchor="end" dominant-baseline="middle">{tick_label(v, ymax)}</text>
        </> }
    });
    let caption = match (fit, t.analysis.as_ref()) {
        (Some(f), Some(a)) => format!(
            "{name} · {} ranks · α = {:.1} µs, B = {:.1} GB/s (algbw), plateau busbw {:.1} GB/s{}",
            t.n_ranks.map_or("?".to_string(), |n| n.to_string()),
            f.alpha_us,
            f.bw_alg_gbps,
            a.plateau_busbw_gbps,
            a.size_at_80pct_plateau_bytes
                .map(|b| format!(", 80% of it from {}", format::bytes(b)))
                .unwrap_or_default()
        ),
        _ => format!("{name} · no fit"),
    };
    html! {
        <figure class="chart" data-testid="fabric-chart" data-collective={name} data-points={pts.len().to_string()}
            data-alpha-us={fit.map(|f| f.alpha_us.to_string())} data-bw-gbps={fit.map(|f| f.bw_alg_gbps.to_string())}>
            <figcaption>{caption}<span class="muted">{format!(" · {}", t.file)}</span></figcaption>
            <svg width={format!("{w:.0}")} height={format!("{h:.0}")} viewBox={format!("0 0 {w:.0} {h:.0}")} role="img"
                aria-label={format!("{name}: bus bandwidth against message size")}>
                { for yticks }
                { for xticks }
                <text class="axis" x="4" y="10">{"busbw GB/s"}</text>
                { dots(0, "pt-out") }
                { dots(1, "pt-in") }
                { for line }
            </svg>
        </figure>
    }
}

#[function_component(Fabric)]
pub fn fabric(p: &Props) -> Html {
    let Some(fab) = p.job.fabric.clone() else {
        return html! {
            <section class="fabric" data-testid="fabric">
                <p class="muted">{"Drop NCCL_DEBUG=INFO logs or nccl-tests output (all_reduce_perf, …) with the traces: they are recognised by content and shown here, and nccl-tests results place the trace's collectives against what the fabric delivers."}</p>
            </section>
        };
    };
    let mut findings: Vec<&Finding> = fab.logs.iter().flat_map(|l| &l.findings).collect();
    findings.extend(fab.tests.iter().flat_map(|t| &t.findings));
    let cmp = &p.job.analysis.fabric;
    html! {
        <section class="fabric" data-testid="fabric">
            if let Some(l) = &fab.logs {
                <h2>{format!("NCCL ranks · {} host{} · {}", l.hosts.len(), if l.hosts.len() == 1 { "" } else { "s" },
                    l.nccl_versions.keys().map(|v| format!("NCCL {v}")).collect::<Vec<_>>().join(", "))}</h2>
                { ranks_table(l) }
                if !l.peers.is_empty() {
                    <h2>{"Peer transports (from the channel lines)"}</h2>
                    { peer_matrix(l) }
                }
            }
            <h2>{"Findings"}</h2>
            <ol class="findings" data-testid="fabric-findings">{ for findings.iter().map(|f| finding(f)) }</ol>
            if findings.is_empty() { <p class="ok">{"Nothing wrong found in the NCCL files."}</p> }
            if !cmp.is_empty() {
                <h2>{"The trace's collectives against the fabric"}</h2>
                <table data-testid="fabric-join">
                    <thead><tr><th>{"Kind"}</th><th class="num">{"Size"}</th><th class="num">{"Achieved busbw"}</th>
                        <th class="num">{"nccl-tests busbw"}</th><th class="num">{"Fraction"}</th><th>{""}</th></tr></thead>
                    <tbody>{ for cmp.iter().map(|c| html! {
                        <tr>
                            <td>{c.kind.name().replace('_', " ")}</td>
                            <td class="num">{format::bytes(c.bytes.max(0) as u64)}</td>
                            <td class="num">{format!("{:.2} GB/s", c.achieved_busbw_gbps)}</td>
                            <td class="num">{format!("{:.2} GB/s", c.fabric_busbw_gbps)}</td>
                            <td class="num">{format!("{:.0}%", 100.0 * c.fraction)}</td>
                            <td class="note">{c.message.clone()}</td>
                        </tr>
                    }) }</tbody>
                </table>
            }
            if let Some(t) = &fab.tests {
                <h2>{"nccl-tests: bus bandwidth against message size"}</h2>
                <p class="legend"><span class="legend-item"><span class="swatch dot-out"></span>{"out of place"}</span>
                    <span class="legend-item"><span class="swatch dot-in"></span>{"in place"}</span>
                    <span class="legend-item"><span class="swatch line-fit"></span>{"fit: busbw = factor × S / (α + S / B)"}</span></p>
                <div class="charts">{ for t.tests.iter().map(chart) }</div>
            }
        </section>
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn labels() {
        assert_eq!(super::pow2_label(8), "256 B");
        assert_eq!(super::pow2_label(12), "4 KiB");
        assert_eq!(super::pow2_label(24), "16 MiB");
        assert_eq!(super::pow2_label(32), "4 GiB");
        assert_eq!(super::tick_label(0.325, 1.3), "0.33");
        assert_eq!(super::tick_label(99.0, 396.0), "99");
    }
}
