use super::*;

#[test]
fn durations_read_well() {
    assert_eq!(dur(401_000_000.0), "401 ms");
    assert_eq!(dur(2_500_000.0), "2.5 ms");
    assert_eq!(dur(45_000.0), "45 µs");
    assert_eq!(dur(8_020_000_000.0), "8.02 s");
    assert_eq!(dur_range(vec![365e6, 561e6]), "365–561 ms");
    assert_eq!(dur_range(vec![400e6, 401e6]), "400 ms");
    assert_eq!(rank_list(&[0, 1, 3]), "0, 1 and 3");
}

#[test]
fn size_bands() {
    assert_eq!(size_histogram(&[1 << 20, 3 << 20, 3 << 20]), "1 × 1 MiB–2 MiB, 2 × 2 MiB–4 MiB");
}
