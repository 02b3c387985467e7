//! The URL hash keeps the view state (`#view=timeline&t0=1200000&t1=3400000&rank=3&step=12`),
//! so a reload or a colleague with the same files lands on the same view. Times are ns from the
//! job's first event; `clock=raw` when the timeline shows each rank's own clock (aligned is the
//! default). `group=NAME` or `role=ROLE` filters the views to a process group or a role
//! ([`crate::groups::Filter`]; the name percent-encoded). `pins=3,5` keeps the ranks pinned to
//! the timeline's top, `path=1` the lead finding's path drawn on it.

use crate::groups::Filter;
use crate::state::View;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HashState {
    pub view: Option<View>,
    pub window: Option<(i64, i64)>,
    pub rank: Option<u32>,
    pub step: Option<u32>,
    pub aligned: bool,
    pub filter: Option<Filter>,
    /// Ranks pinned to the timeline's top, in pin order.
    pub pins: Vec<u32>,
    /// The lead finding's path drawn on the timeline.
    pub path: bool,
}

impl Default for HashState {
    fn default() -> Self {
        HashState {
            view: None,
            window: None,
            rank: None,
            step: None,
            aligned: true,
            filter: None,
            pins: Vec::new(),
            path: false,
        }
    }
}

/// Percent-encodes what is not a letter, digit or one of `-._~` (a group's name may be anything).
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = b
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (b[i], hex) {
            (b'%', Some(v)) => {
                out.push(v);
                i += 3;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
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
            "group" => h.filter = Filter::from_key(&format!("group:{}", decode(v))),
            "role" => h.filter = Filter::from_key(&format!("role:{v}")),
            "pins" => h.pins = v.split(',').filter_map(|x| x.parse::<u32>().ok()).take(64).collect(),
            "path" => h.path = v == "1",
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
    match &h.filter {
        Some(Filter::Group(g)) => s.push_str(&format!("&group={}", encode(g))),
        Some(Filter::Role(r)) => s.push_str(&format!("&role={r}")),
        None => {}
    }
    if !h.pins.is_empty() {
        let pins: Vec<String> = h.pins.iter().map(u32::to_string).collect();
        s.push_str(&format!("&pins={}", pins.join(",")));
    }
    if h.path {
        s.push_str("&path=1");
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
        let h = HashState {
            view: Some(View::Layout),
            filter: Some(Filter::Group("mesh tp/0 é".into())),
            ..HashState::default()
        };
        assert_eq!(format(&h), "#view=layout&group=mesh%20tp%2F0%20%C3%A9");
        assert_eq!(parse(&format(&h)), h);
        let h = HashState { filter: Some(Filter::Role(rankscope_core::analyze::layout::Role::Tensor)), ..h };
        assert_eq!(format(&h), "#view=layout&role=tensor");
        assert_eq!(parse(&format(&h)), h);
        assert_eq!(parse("#role=nope&group=%zz").filter, Some(Filter::Group("%zz".into())));
        let h =
            HashState { view: Some(View::Timeline), pins: vec![5, 2], path: true, ..HashState::default() };
        assert_eq!(format(&h), "#view=timeline&pins=5,2&path=1");
        assert_eq!(parse(&format(&h)), h);
        assert_eq!(parse("#pins=1,x,3&path=0").pins, vec![1, 3]);
        assert!(!parse("#pins=1,x,3&path=0").path);
    }
}
