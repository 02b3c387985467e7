//! Which files an analysis reads: paths expanded (folders walked as the app walks a dropped
//! folder), each file's kind sniffed from its head, explicit `FILE=N` ranks and the rules.

use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use rankscope_core::job::{self, InputKind};
use rankscope_core::normalize::Rules;

/// One input file, and whether it was found by walking a folder (rather than named).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Input {
    pub path: PathBuf,
    pub walked: bool,
}

/// Expands files and directories into input files: a directory contributes every regular file
/// below it whose name the app would take from the same folder
/// ([`rankscope_core::job::is_folder_candidate`]: `.json`, `.json.gz`, `.log`, `.txt`, `.out`,
/// any case) or that is a Flight Recorder dump (sorted); what each is, is decided by content; a file named explicitly is taken whatever its
/// name or kind (`<(zcat trace.gz)` is a pipe). The walk visits each real directory once (a
/// symlink to `.` or to a parent is not a loop), takes each real file once however many links
/// lead to it, and skips special files (a FIFO named `*.json` is never opened), links named like
/// an input that lead to a folder, and sub-folders it cannot list, each with a note.
pub fn expand(paths: &[PathBuf], notes: &mut Vec<String>) -> Result<Vec<Input>> {
    let mut out = Vec::new();
    let mut dirs = std::collections::BTreeSet::new();
    let mut seen = std::collections::BTreeSet::new();
    for p in paths {
        let meta = std::fs::metadata(p).with_context(|| format!("cannot read {}", p.display()))?;
        if meta.is_dir() {
            let mut found = Vec::new();
            walk(p, &mut found, &mut dirs, &mut seen, notes)?;
            found.sort();
            out.extend(found.into_iter().map(|path| Input { path, walked: true }));
        } else {
            if let Ok(c) = std::fs::canonicalize(p) {
                seen.insert(c);
            }
            out.push(Input { path: p.clone(), walked: false });
        }
    }
    Ok(out)
}

fn walk(
    dir: &Path,
    out: &mut Vec<PathBuf>,
    dirs: &mut std::collections::BTreeSet<PathBuf>,
    seen: &mut std::collections::BTreeSet<PathBuf>,
    notes: &mut Vec<String>,
) -> Result<()> {
    let real = std::fs::canonicalize(dir).with_context(|| format!("cannot read {}", dir.display()))?;
    if !dirs.insert(real) {
        return Ok(());
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot list {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for path in entries {
        // `metadata` follows symlinks: a link is what it points to (a dangling one is skipped).
        let Ok(meta) = std::fs::metadata(&path) else { continue };
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let json_name = rankscope_core::job::is_folder_candidate(name);
        if meta.is_dir() {
            // A link named like an input (`trace.json` → /tmp) is not a folder of this job:
            // walking it pulled in other people's traces.
            if json_name && std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink()) {
                notes.push(format!(
                    "skipped {} (a link named like a file that leads to a folder)",
                    path.display()
                ));
                continue;
            }
            // A sub-folder that cannot be listed is a note: the rest of the walk is the job.
            if let Err(e) = walk(&path, out, dirs, seen, notes) {
                notes.push(format!("skipped {}: {e:#}", path.display()));
            }
            continue;
        }
        if !meta.is_file() {
            if json_name {
                notes.push(format!("skipped {} (not a regular file)", path.display()));
            }
            continue;
        }
        // Flight Recorder dumps carry any name (`fr_rank0`, `*.pkl`), and so does the evidence
        // dropped beside the traces (`metrics.prom`, `*.csv`, `*.jsonl`): asked by content.
        if !json_name && !sniff_file(&path).any_name() {
            continue;
        }
        let real = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
        if seen.insert(real) {
            out.push(path);
        }
    }
    Ok(())
}

/// Parses `FILE=N` rank mappings.
pub fn parse_rank_map(items: &[String]) -> Result<Vec<(String, u32)>> {
    items
        .iter()
        .map(|s| {
            let (f, r) = s.rsplit_once('=').with_context(|| format!("--rank expects FILE=N, got `{s}`"))?;
            let r: u32 =
                r.trim().parse().with_context(|| format!("--rank {s}: `{r}` is not a rank number"))?;
            Ok((f.to_string(), r))
        })
        .collect()
}

/// The default rules, with a user rule file in front when given.
pub fn load_rules(path: Option<&Path>) -> Result<Rules> {
    match path {
        None => Ok(Rules::default()),
        Some(p) => {
            let text =
                std::fs::read_to_string(p).with_context(|| format!("cannot read rules {}", p.display()))?;
            Rules::with_user_rules(&text).with_context(|| format!("rules {}", p.display()))
        }
    }
}

/// What a file is, from its first [`job::SNIFF_BYTES`] ([`job::detect`]); a file that cannot
/// be opened is handed to the trace reader, which says why.
pub fn sniff_file(path: &Path) -> InputKind {
    job::detect(&head_of(path))
}

pub(crate) fn head_of(path: &Path) -> Vec<u8> {
    let mut head = vec![0u8; job::SNIFF_BYTES];
    let mut n = 0;
    if let Ok(mut f) = std::fs::File::open(path) {
        while n < head.len() {
            match f.read(&mut head[n..]) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
    }
    head.truncate(n);
    head
}

/// Explicit `FILE=N` rank mappings.
pub type RankMap = Vec<(String, u32)>;

/// The inputs every trace command shares: files from paths, explicit ranks, rules. A `--rank`
/// naming no input file is an error (it would otherwise be ignored in silence).
pub fn inputs(
    paths: &[PathBuf],
    rank: &[String],
    rules: Option<&Path>,
    notes: &mut Vec<String>,
) -> Result<(Vec<Input>, RankMap, Rules)> {
    let files = expand(paths, notes)?;
    if files.is_empty() {
        anyhow::bail!("no input files (.json, .json.gz, .log, .txt, .out or Flight Recorder dumps) under the given paths");
    }
    let map = parse_rank_map(rank)?;
    for (f, r) in &map {
        // The core matches a mapping to a file by its whole name or a trailing path part (a
        // rank of a file that holds several is `FILE (rank K)`).
        let f = &rankscope_core::normalize::multirank::file_of(f).to_string();
        let hit = files.iter().any(|i| {
            let s = i.path.display().to_string();
            s == *f || s.ends_with(&format!("/{f}"))
        });
        anyhow::ensure!(hit, "--rank {f}={r}: no input file is called `{f}`");
    }
    Ok((files, map, load_rules(rules)?))
}
