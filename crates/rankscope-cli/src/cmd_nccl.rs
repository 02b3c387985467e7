//! `rankscope nccl` and `rankscope nccl-tests` (being written).

#[derive(Debug, clap::Args)]
pub struct LogArgs {}

#[derive(Debug, clap::Args)]
pub struct TestsArgs {}

pub fn run_log(_a: LogArgs) -> anyhow::Result<u8> {
    anyhow::bail!("nccl is not written yet")
}

pub fn run_tests(_a: TestsArgs) -> anyhow::Result<u8> {
    anyhow::bail!("nccl-tests is not written yet")
}
