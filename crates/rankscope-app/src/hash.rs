//! The URL hash keeps the view state (`#view=timeline&t0=1200000&t1=3400000`), so a reload or a
//! colleague with the same files lands on the same view. Times are ns from the job's first event.

use crate::state::View;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HashState {
    pub view: Option<View>,
    pub window: Option<(i64, i64)>,
}

pub fn parse(hash: &str) -> HashState {
    let mut h = HashState::default();
    let (mut t0, mut t1) = (None, None);
    for pair in hash.trim_start_matches('#').split('&') {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        match k {
            "view" => h.view = View::from_name(v),
            "t0" => t0 = v.parse::<i64>().ok(),
            "t1" => t1 = v.parse::<i64>().ok(),
            _ => {}
        }
    }
    if let (Some(a), Some(b)) = (t0, t1) {
        if b > a {
            h.window = Some((a, b));
        }
    }
    h
}

pub fn format(h: &HashState) -> String {
    let mut s = format!("#view={}", h.view.unwrap_or(View::Summary).name());
    if let Some((a, b)) = h.window {
        s.push_str(&format!("&t0={a}&t1={b}"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let h = HashState { view: Some(View::Timeline), window: Some((12, 3400)) };
        assert_eq!(format(&h), "#view=timeline&t0=12&t1=3400");
        assert_eq!(parse(&format(&h)), h);
        assert_eq!(parse("#view=nope&t0=5&t1=2"), HashState::default());
        assert_eq!(parse(""), HashState::default());
    }
}
