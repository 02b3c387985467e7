//! The third blind check (`tests/zoo/make_zoo_blind3.py`, tests/zoo/README.md): real runs of
//! shapes the zoo lacked, each read as a new user would read its first finding.

// Tests read the zoo from disk; the core never does (its clippy.toml).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod common;

use common::zoo::*;

use rankscope_core::finding::EvidenceKey;

/// The same stall on every rank leaves nobody late: it is found where every rank spends its
/// time with no operator running (from a third of the step), or in one block (below that),
/// its gain the least any rank measured itself sleeping there.
#[test]
fn a_stall_every_rank_has_is_a_host_stall_of_every_rank() {
    for (name, region) in [
        ("stall_all_4rank", "save_state"),
        ("stall_all_unann", "DistributedDataParallel.forward"),
        // A sixth and a fifth of the step (`make_zoo_small_stall.py`): found as one block.
        ("stall_all_small", "write_metrics"),
        ("stall_all_small_unann", "DistributedDataParallel.forward"),
    ] {
        let (a, spec) = run(name);
        let f = check_expected(name, &a, &spec).unwrap_or_else(|| panic!("{name}: nothing expected"));
        let l = f.location.as_ref().unwrap_or_else(|| panic!("{name}: no place: {}", f.message));
        assert_eq!(l.regions.last().map(String::as_str), Some(region), "{name}: {:?}", l.regions);
        assert!(f.message.starts_with("Every rank stalls on the host"), "{name}: {}", f.message);
        let least =
            f.ranks.iter().map(|&r| measured(&spec, r, "injected_sleep_ms")).fold(f64::INFINITY, f64::min);
        // The gain is the replay's: every rank's operator-free time in the region taken out.
        close(f.impact_ns as f64, least, &format!("{name}: gain"));
        assert_eq!(f.evidence[EvidenceKey::ReplayedGainNs] as i64, f.impact_ns, "{name}: {:?}", f.evidence);
        close(f.evidence[EvidenceKey::StallNs], least, &format!("{name}: stall"));
        // The hosts' noise that comes with it is information, never above low.
        assert!(
            a.findings.iter().filter(|x| x.id == "arrival_jitter").all(|x| x.severity.name() == "low"),
            "{name}: {:?}",
            a.findings.iter().map(|x| (x.id.as_str(), x.severity.name())).collect::<Vec<_>>()
        );
    }
}

/// The same stall on two of four ranks: those two are the late ones, named together.
#[test]
fn a_stall_two_ranks_share_names_both() {
    let name = "stall_two_ranks";
    let (a, spec) = run(name);
    let f = check_expected(name, &a, &spec).unwrap_or_else(|| panic!("{name}: nothing expected"));
    assert!(!f.message.starts_with("Every rank"), "{name}: {}", f.message);
    let l = f.location.as_ref().unwrap_or_else(|| panic!("{name}: no place"));
    assert_eq!(l.regions.last().map(String::as_str), Some("straggler_sleep"), "{name}: {:?}", l.regions);
}

/// A core taken by another process from the third of six profiled steps on: a slow device (the
/// same shapes, run slower). Its operators typically take longer, but by less than half of
/// its excess: the words say so, never that they "run as long as elsewhere".
#[test]
fn a_device_that_slows_mid_run_is_a_slow_device() {
    let name = "hog_from_step2";
    let (a, spec) = run(name);
    let f = check_expected(name, &a, &spec).unwrap_or_else(|| panic!("{name}: nothing expected"));
    let typical = f.evidence[EvidenceKey::TypicalOpRatio];
    assert!(typical > 1.1, "{name}: {:?}", f.evidence);
    assert!(!f.message.contains("as long as elsewhere"), "{name}: {}", f.message);
    assert!(f.message.contains(&format!("{typical:.2}× as long")), "{name}: {}", f.message);
    assert!(
        f.evidence[EvidenceKey::ShapesSame] >= 0.9 * f.evidence[EvidenceKey::ShapesCompared],
        "{name}: {:?}",
        f.evidence
    );
}
