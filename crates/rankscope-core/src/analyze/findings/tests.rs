use super::*;

#[test]
fn size_bands() {
    assert_eq!(size_histogram(&[1 << 20, 3 << 20, 3 << 20]), "1 × 1 MiB–2 MiB, 2 × 2 MiB–4 MiB");
}
