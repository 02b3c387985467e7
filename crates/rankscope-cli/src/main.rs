//! `rankscope`: the command-line shell around `rankscope-core`.

use clap::{Parser, Subcommand};

mod cmd_analyze;
mod cmd_diff;
mod cmd_export;
mod cmd_fr;
mod cmd_inspect;
mod cmd_inspector;
mod cmd_metrics;
mod cmd_nccl;
mod cmd_nccl_ras;
mod cmd_part;
mod cmd_runs;
mod cmd_steplog;
mod cmd_synth;
mod load;
mod out;

#[derive(Debug, Parser)]
#[command(
    name = "rankscope",
    version,
    about = "Reconstructs a distributed training job from its per-rank traces"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Per file: rank, world size, devices, span, event counts, steps, lanes, diagnostics.
    Inspect(cmd_inspect::Args),
    /// Per rank × step breakdown, clock alignment, collectives, stragglers, findings.
    Analyze(cmd_analyze::Args),
    /// The metrics `--fail-on` gates test, and what each measures.
    Gates(cmd_analyze::GatesArgs),
    /// Every table (steps, collectives, groups, findings, operators) and the events as Parquet
    /// or Arrow IPC files for DuckDB, pandas, polars and pyarrow (docs/columnar.md).
    Export(cmd_export::Args),
    /// Compare two runs: what changed beyond the runs' own noise, and why.
    Diff(cmd_diff::Args),
    /// One line per run: date, ranks, layout, step time p50 / p95, communication, lead finding.
    Runs(cmd_runs::Args),
    /// Read PyTorch Flight Recorder dumps (one per rank): who is stuck in which collective,
    /// who never issued it, mismatched shapes.
    Fr(cmd_fr::Args),
    /// Generate a deterministic synthetic multi-rank Kineto trace set.
    #[command(after_help = cmd_synth::SCENARIOS_HELP)]
    Synth(cmd_synth::Args),
    /// Read NCCL_DEBUG=INFO logs: transports, versions, topology, warnings.
    Nccl(cmd_nccl::LogArgs),
    /// Read nccl-tests (`*_perf`) output: bandwidth tables and latency-bandwidth fit.
    NcclTests(cmd_nccl::TestsArgs),
    /// Read NCCL Inspector logs (the profiler plugin's line per operation): per communicator
    /// its calls by kind and size, and the member that arrives last.
    NcclInspector(cmd_inspector::Args),
    /// Read an `ncclras` status report (JSON or text): dead, missing and failed ranks.
    NcclRas(cmd_nccl_ras::Args),
    /// Read a training framework's step log (Megatron-LM's iteration lines and timers): the
    /// iteration time over the whole run, its spikes, timers uneven across ranks.
    Steplog(cmd_steplog::Args),
    /// Read cluster metrics (DCGM exporter, dcgmi dmon, node-exporter, Prometheus exports) and
    /// join them with the traces: communication-bound, throttled GPUs, PFC storms, idle NICs.
    Metrics(cmd_metrics::Args),
    #[command(flatten)]
    Split(cmd_part::Command),
}

fn main() -> std::process::ExitCode {
    // The string tables' hash keys from std's per-process random keys (the core has no OS).
    rankscope_core::model::strings::seed_table_keys(std::hash::BuildHasher::hash_one(
        &std::collections::hash_map::RandomState::new(),
        0x7265_6164_u64,
    ));
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Inspect(a) => cmd_inspect::run(a),
        Command::Analyze(a) => cmd_analyze::run(a),
        Command::Diff(a) => cmd_diff::run(a),
        Command::Export(a) => cmd_export::run(a),
        Command::Gates(a) => cmd_analyze::run_gates(a),
        Command::Runs(a) => cmd_runs::run(a),
        Command::Fr(a) => cmd_fr::run(a),
        Command::Synth(a) => cmd_synth::run(a),
        Command::Nccl(a) => cmd_nccl::run_log(a),
        Command::NcclTests(a) => cmd_nccl::run_tests(a),
        Command::NcclInspector(a) => cmd_inspector::run(a),
        Command::NcclRas(a) => cmd_nccl_ras::run(a),
        Command::Steplog(a) => cmd_steplog::run(a),
        Command::Metrics(a) => cmd_metrics::run(a),
        Command::Split(c) => cmd_part::run(c),
    };
    match result {
        Ok(code) => std::process::ExitCode::from(code),
        Err(e) if out::is_pipe_closed(&e) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            crate::out::say(&format!("error: {e:#}"));
            std::process::ExitCode::from(2)
        }
    }
}
