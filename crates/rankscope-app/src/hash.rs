//! The URL hash keeps the view state (`#view=timeline&t0=1200000&t1=3400000&rank=3&step=12`),
//! so a reload or a colleague with the same files lands on the same view. Times are ns from the
//! job's first event; `clock=raw` when the timeline shows each rank's own clock (aligned is the
//! default).

use crate::state::View;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HashState {
    pub view: Option<View>,
    pub window: Option<(i64, i64)>,
    pub rank: Option<u32>,
    pub step: Option<u32>,
    pub aligned: bool,
}

impl Default for HashState {
    fn default() -> Self {
        HashState { view: None, window: None, rank: None, step: None, aligned: true }
    }
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
            "rank" => h.rank = v.parse::<u32>().ok(),
            "step" => h.step = v.parse::<u32>().ok(),
            "clock" => h.aligned = v != "raw",
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
    if let Some(r) = h.rank {
        s.push_str(&format!("&rank={r}"));
    }
    if let Some(st) = h.step {
        s.push_str(&format!("&step={st}"));
    }
    if !h.aligned {
        s.push_str("&clock=raw");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let h = HashState { view: Some(View::Timeline), window: Some((12, 3400)), ..HashState::default() };
        assert_eq!(format(&h), "#view=timeline&t0=12&t1=3400");
        assert_eq!(parse(&format(&h)), h);
        let h = HashState { rank: Some(3), step: Some(12), aligned: false, ..h };
        assert_eq!(format(&h), "#view=timeline&t0=12&t1=3400&rank=3&step=12&clock=raw");
        assert_eq!(parse(&format(&h)), h);
        assert_eq!(parse("#view=nope&t0=5&t1=2"), HashState::default());
        assert_eq!(parse(""), HashState::default());
    }
}
