//! The evidence dropped beside the traces, read with them into the analysis' `beside` member:
//! cluster metrics ([`crate::metrics`]: joined with the ranks on the aligned clock, stated how and
//! with the residual), `ncclras` status reports ([`crate::nccl::ras`]), NCCL Inspector logs
//! ([`crate::nccl::inspector`], joined with the traces' matched collectives by
//! [`inspector_join`]) and training step logs ([`crate::steplog`]: where the profiled steps sit
//! in the run the log covers). What the joins mean is judged by the findings layer (its
//! `beside` causes), which reads this member and never these inputs.
//!
//! Each input is what a job's shell was handed as a text of its kind ([`Inputs`]); a file that
//! cannot be read is a [`Problem`] (its name and why), the others still count.

use serde::{Deserialize, Serialize};

use super::collectives::Op;
use super::inspector_join::{self, InspectorJoin};
use super::Analysis;
use crate::metrics::join::{RankPlace, StepSpan};
use crate::metrics::{self, MetricsReport, ReadOptions};
use crate::nccl::inspector::{self, InspectorReport};
use crate::nccl::ras::{self, RasStatus};
use crate::steplog::{self, ProfileCheck, ProfiledStep, TimerSummary};

/// The texts of a job that are evidence beside its traces, by kind: `(file name, bytes)`.
#[derive(Debug, Clone, Default)]
pub struct Inputs<'a> {
    pub metrics: Vec<(&'a str, &'a [u8])>,
    pub ras: Vec<(&'a str, &'a [u8])>,
    pub inspector: Vec<(&'a str, &'a [u8])>,
    pub steplogs: Vec<(&'a str, &'a [u8])>,
}

impl Inputs<'_> {
    pub fn is_empty(&self) -> bool {
        self.metrics.is_empty()
            && self.ras.is_empty()
            && self.inspector.is_empty()
            && self.steplogs.is_empty()
    }
}

/// What the evidence beside the traces says, joined with them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Beside {
    /// The cluster metrics' report (`rankscope metrics --json`'s shape): with traces, its
    /// `join` says how the series were put on the aligned clock and the residual, and its
    /// `findings` what the join found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<MetricsReport>,
    /// One `ncclras` status per file.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ras: Vec<RasFile>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inspector: Option<InspectorBeside>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steplogs: Vec<StepLogSummary>,
    /// Files of these kinds that could not be read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<Problem>,
}

/// An `ncclras` report and the file it came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RasFile {
    pub file: String,
    pub status: RasStatus,
}

/// The Inspector logs: their summary, and with traces their join with the matched collectives.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InspectorBeside {
    pub files: Vec<String>,
    pub report: InspectorReport,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub join: Option<InspectorJoin>,
}

/// A step log over the run, without its lines (`rankscope steplog --json` has them): counts,
/// the elapsed time's spread, the timers, and with traces where the profiled steps sit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepLogSummary {
    pub file: String,
    /// Iteration lines read, and the first and last iteration they number.
    pub iterations: usize,
    pub first_iteration: Option<u64>,
    pub last_iteration: Option<u64>,
    pub elapsed_p50_ms: Option<f64>,
    pub elapsed_p95_ms: Option<f64>,
    pub elapsed_max_ms: Option<f64>,
    /// Iteration lines at least [`steplog::SPIKE`]× the median.
    pub spikes: usize,
    pub timers: Vec<TimerSummary>,
    pub notes: Vec<String>,
    /// The profiled steps against the run ([`steplog::against_profile`]); absent without
    /// traces (or without iteration lines).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<ProfileCheck>,
    /// The profiled steps that are as slow as the log's slow phases: more than
    /// [`steplog::NEAR`] over the log's median iteration (the steps the slow phase is seen in).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slow_profiled: Vec<ProfiledStep>,
}

/// A file beside the traces that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Problem {
    pub file: String,
    pub message: String,
}

/// The profiled steps of the analysis (`ProfilerStep#N`) and the job's time for each: its
/// slowest rank's wall time.
pub fn profiled_steps(a: &Analysis) -> Vec<ProfiledStep> {
    a.steps
        .iter()
        .filter_map(|s| {
            let wall = s.per_rank.iter().map(|r| r.wall_ns).max()?;
            Some(ProfiledStep { step: s.step, ms: wall as f64 / 1e6 })
        })
        .collect()
}

/// Each rank's place for the metrics join ([`crate::metrics::join`]): its host, its GPU (the
/// device most of its kernels ran on), its clock offset and residual, its steps.
pub fn places(a: &Analysis) -> Vec<RankPlace> {
    a.ranks
        .iter()
        .map(|r| {
            let gpu = a
                .gpu_idle
                .iter()
                .filter(|g| g.rank == r.rank && g.device >= 0)
                .max_by_key(|g| (g.kernels, -g.device))
                .and_then(|g| u32::try_from(g.device).ok());
            let al = a.alignment.iter().find(|x| x.rank == r.rank);
            let steps = a
                .steps
                .iter()
                .filter_map(|s| {
                    let p = s.per_rank.iter().find(|p| p.rank == r.rank)?;
                    Some(StepSpan {
                        step: s.step,
                        start_ns: p.start_ns,
                        end_ns: p.end_ns,
                        compute_ns: p.compute_ns,
                        comm_ns: p.comm_ns,
                    })
                })
                .collect();
            RankPlace {
                rank: r.rank,
                host: r.host.clone(),
                gpu,
                offset_ns: al.map_or(0, |x| x.offset_ns),
                align_residual_ns: al.map_or(0, |x| x.residual_ns),
                steps,
            }
        })
        .collect()
}

/// Reads the evidence beside the traces and joins it with the analysis (`ops`: the traces'
/// matched collectives, for the Inspector join). `None` without such inputs. Without traces
/// (no rank), each input is read alone: the metrics' series, the Inspector's summary, the step
/// log's run, with no join.
pub fn measure(a: &Analysis, ops: &[Op], inputs: &Inputs<'_>) -> Option<Beside> {
    if inputs.is_empty() {
        return None;
    }
    let traces = !a.ranks.is_empty();
    let mut problems = Vec::new();
    // Texts given gzipped, inflated (each reader takes text).
    let mut unzip = |v: &[(&str, &[u8])]| -> Vec<(String, Vec<u8>)> {
        v.iter()
            .map(|&(name, bytes)| {
                let (text, problem) = inflated(bytes);
                if let Some(message) = problem {
                    problems.push(Problem { file: name.to_string(), message });
                }
                (name.to_string(), text)
            })
            .collect()
    };
    let owned =
        [unzip(&inputs.metrics), unzip(&inputs.ras), unzip(&inputs.inspector), unzip(&inputs.steplogs)];
    let refs = |k: usize| -> Vec<(&str, &[u8])> {
        owned[k].iter().map(|(n, b)| (n.as_str(), b.as_slice())).collect()
    };
    let inputs = Inputs { metrics: refs(0), ras: refs(1), inspector: refs(2), steplogs: refs(3) };
    let metrics = (!inputs.metrics.is_empty()).then(|| {
        let places = traces.then(|| places(a));
        let (rep, errors) = metrics::report(&inputs.metrics, &ReadOptions::default(), places.as_deref());
        problems.extend(errors.iter().map(|e| Problem { file: e.file.clone(), message: e.to_string() }));
        rep
    });
    let mut ras_files = Vec::new();
    for (name, bytes) in &inputs.ras {
        match ras::read(name, bytes) {
            Ok(status) => ras_files.push(RasFile { file: name.to_string(), status }),
            Err(e) => problems.push(Problem { file: name.to_string(), message: e.to_string() }),
        }
    }
    let inspector = (!inputs.inspector.is_empty()).then(|| {
        let reads: Vec<inspector::Read> =
            inputs.inspector.iter().map(|(n, b)| inspector::read(n, b)).collect();
        let report = inspector::summarize(&reads);
        let join = (traces && !ops.is_empty()).then(|| {
            let records: Vec<inspector::Record> =
                reads.iter().flat_map(|r| r.records.iter().cloned()).collect();
            inspector_join::join(&records, ops, a.matching.method)
        });
        InspectorBeside { files: inputs.inspector.iter().map(|(n, _)| n.to_string()).collect(), report, join }
    });
    let profiled = if traces { profiled_steps(a) } else { Vec::new() };
    let steplogs = inputs.steplogs.iter().map(|(n, b)| steplog_summary(n, b, &profiled)).collect();
    Some(Beside { metrics, ras: ras_files, inspector, steplogs, problems })
}

/// The most a gzipped text beside the traces may inflate to: 256 times its size, 64 MiB at
/// least (the parts' and digests' rule: real logs and exports shrink 5 to 30 times, a bomb
/// costs no more than this).
pub fn inflate_cap(compressed: usize) -> u64 {
    (compressed as u64).saturating_mul(256).max(64 << 20)
}

/// A text as its reader takes it: inflated when given gzipped (up to [`inflate_cap`]; what
/// inflated before damage or the cap is kept, and the problem said), as given otherwise.
pub fn inflated(bytes: &[u8]) -> (Vec<u8>, Option<String>) {
    if !bytes.starts_with(&[0x1f, 0x8b]) {
        return (bytes.to_vec(), None);
    }
    let cap = inflate_cap(bytes.len());
    let mut out: Vec<u8> = Vec::new();
    let mut over = false;
    let mut z = crate::parse::gzip::Gunzip::default();
    // Fed in slices so that a bomb stops at the cap, not after inflating the whole input.
    for chunk in bytes.chunks(64 << 10) {
        z.feed(chunk, &mut |b| {
            let room = cap.saturating_sub(out.len() as u64) as usize;
            if b.len() > room {
                over = true;
            }
            out.extend_from_slice(&b[..b.len().min(room)]);
        });
        if over {
            break;
        }
    }
    let ended = if over { None } else { z.finish() };
    let problem = if over {
        Some(format!("gzip: inflates to more than {} MiB (256 times its size): read up to there", cap >> 20))
    } else if let Some((at, why)) = z.fault.clone() {
        Some(format!("gzip: {why} (at compressed byte {at}): read what inflated before it"))
    } else {
        ended.map(|why| format!("gzip: {why}"))
    };
    (out, problem)
}

fn steplog_summary(file: &str, bytes: &[u8], profiled: &[ProfiledStep]) -> StepLogSummary {
    let log = steplog::read(&String::from_utf8_lossy(bytes));
    let profile = steplog::against_profile(&log, profiled);
    let slow_profiled = match log.elapsed_p50_ms {
        Some(m) if profile.is_some() => {
            profiled.iter().copied().filter(|p| p.ms > m * (1.0 + steplog::NEAR)).collect()
        }
        _ => Vec::new(),
    };
    StepLogSummary {
        file: file.to_string(),
        iterations: log.iterations.len(),
        first_iteration: log.iterations.first().map(|i| i.iteration),
        last_iteration: log.iterations.last().map(|i| i.iteration),
        elapsed_p50_ms: log.elapsed_p50_ms,
        elapsed_p95_ms: log.elapsed_p95_ms,
        elapsed_max_ms: log.elapsed_max_ms,
        spikes: log.spikes.len(),
        timers: log.timers,
        notes: log.notes,
        profile,
        slow_profiled,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gz(b: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        e.write_all(b).unwrap_or_else(|e| panic!("{e}"));
        e.finish().unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_gzipped_text_is_read_inflated_under_its_cap() {
        let text = b"iteration 1/10 | elapsed time per iteration (ms): 100.0 |\n".repeat(1000);
        assert_eq!(inflated(&text), (text.clone(), None));
        assert_eq!(inflated(&gz(&text)), (text.clone(), None));
        // Cut: what inflated before the cut, and the problem said.
        let z = gz(&text);
        let (got, problem) = inflated(&z[..z.len() / 2]);
        assert!(!got.is_empty() && text.starts_with(&got), "{} bytes", got.len());
        assert!(problem.is_some_and(|p| p.contains("cut")));
        // A bomb: 200 MiB of blanks in ~200 kB stops at its cap.
        let bomb = gz(&vec![b' '; 200 << 20]);
        let (got, problem) = inflated(&bomb);
        assert_eq!(got.len() as u64, inflate_cap(bomb.len()));
        assert!(got.len() < 100 << 20 && problem.is_some_and(|p| p.contains("inflates to more than")));
    }
}
