//! `rankscope synth` (being written).

#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(_a: Args) -> anyhow::Result<u8> {
    anyhow::bail!("synth is not written yet")
}
