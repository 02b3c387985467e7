//! Do these files come from one job? (docs/metrics.md, "One job or several")
//!
//! Files dropped together are not always one job's: a rank of last year's run beside this
//! week's, a single-GPU trace beside a 64-rank job's. Analysed as one, they give a job that
//! never ran (steps that do not line up, a "late rank" a year late, shares above 100%). Two
//! ranks belong to one job unless what each trace says of its job differs:
//! - **world size** (`distributedInfo.world_size`), when both say it;
//! - **backend** (`distributedInfo.backend`), when both say it;
//! - **time**: the ranks of one job are profiled together, so their profiled steps overlap, up
//!   to the hosts' clock disagreement (milliseconds to seconds under NTP); windows more than
//!   [`APART_NS`] apart are different runs.
//!
//! The ranks joined by these relations (transitively) form the jobs; more than one, and the
//! analysis says so first and judges nothing ([`crate::normalize::JobError::MixedJobs`]).

use std::collections::BTreeMap;

use super::RankInfo;

/// Profiled windows further apart than this are different runs (10 minutes: far beyond any
/// clock disagreement between the hosts of one job, far below the time between two runs).
pub const APART_NS: i64 = 600_000_000_000;

/// What a rank says of its job: its world size, backend and profiled window (own clock, ns).
#[derive(Debug, Clone)]
pub struct Claim<'a> {
    pub info: &'a RankInfo,
    pub window: Option<(i64, i64)>,
}

/// Why two ranks cannot be of one job, if they cannot.
pub fn differ(a: &Claim<'_>, b: &Claim<'_>) -> Option<String> {
    if let (Some(x), Some(y)) = (a.info.world_size, b.info.world_size) {
        if x != y {
            return Some(format!("world size {x} against {y}"));
        }
    }
    if let (Some(x), Some(y)) = (a.info.backend.as_deref(), b.info.backend.as_deref()) {
        if x != y {
            return Some(format!("backend {x} against {y}"));
        }
    }
    if let (Some((s0, e0)), Some((s1, e1))) = (a.window, b.window) {
        let gap = (s1 - e0).max(s0 - e1);
        if gap > APART_NS {
            return Some(format!("profiled {} apart", apart_words(gap)));
        }
    }
    None
}

fn apart_words(ns: i64) -> String {
    let s = ns / 1_000_000_000;
    match s {
        s if s >= 2 * 86_400 => format!("{} days", s / 86_400),
        s if s >= 2 * 3_600 => format!("{} hours", s / 3_600),
        s => format!("{} minutes", s / 60),
    }
}

/// The jobs among the ranks (each a list of ranks, in rank order; jobs by their first rank),
/// and for two jobs or more, one reason that tells the first two apart.
pub fn split(claims: &[Claim<'_>]) -> (Vec<Vec<u32>>, Option<String>) {
    // Union-find over "no difference": ranks of one job never differ, so joining every pair
    // that does not differ groups each job's ranks.
    let n = claims.len();
    let mut parent: Vec<usize> = (0..n).collect();
    fn root(p: &mut [usize], mut i: usize) -> usize {
        while p[i] != i {
            p[i] = p[p[i]];
            i = p[i];
        }
        i
    }
    // A pair already joined is not compared (one job's 1,024 ranks: one comparison each).
    for i in 1..n {
        for j in 0..i {
            let (a, b) = (root(&mut parent, i), root(&mut parent, j));
            if a != b && differ(&claims[i], &claims[j]).is_none() {
                parent[a] = b;
            }
        }
    }
    let mut jobs: BTreeMap<usize, Vec<u32>> = BTreeMap::new();
    for i in 0..n {
        let r = root(&mut parent, i);
        jobs.entry(r).or_default().push(claims[i].info.rank);
    }
    let mut jobs: Vec<Vec<u32>> = jobs.into_values().collect();
    for j in &mut jobs {
        j.sort_unstable();
    }
    jobs.sort();
    let why = (jobs.len() > 1)
        .then(|| {
            let of = |r: u32| claims.iter().find(|c| c.info.rank == r);
            let (a, b) = (of(jobs[0][0])?, of(jobs[1][0])?);
            differ(a, b)
        })
        .flatten();
    (jobs, why)
}
