//! A small JSON value tree for the few top-level members that are not events
//! (`distributedInfo`, `deviceProperties`, ...). Events never go through here: a tree per event
//! is what makes generic JSON parsing slow.

use super::json::{self, classify_scalar, Res, ScalarKind, Stop, Str};

/// Deepest nesting accepted in a metadata value (a guard against stack exhaustion).
const MAX_DEPTH: usize = 64;

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    /// The number's text, kept exact.
    Num(String),
    Str(String),
    Arr(Vec<Value>),
    Obj(Vec<(String, Value)>),
    /// A bare word such as `N/A`.
    Bare(String),
}

impl Value {
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Obj(m) => m.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Num(t) => json::integer(t.as_bytes()).ok(),
            Value::Str(t) => json::integer(t.trim().as_bytes()).ok(),
            _ => None,
        }
    }

    /// Strings as they are; numbers and booleans as their text.
    pub fn as_text(&self) -> Option<String> {
        match self {
            Value::Str(s) | Value::Num(s) => Some(s.clone()),
            Value::Bool(b) => Some(b.to_string()),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Arr(v) => Some(v),
            _ => None,
        }
    }

    /// Whether the tree holds a bare word anywhere.
    pub fn has_bare_word(&self) -> bool {
        match self {
            Value::Bare(_) => true,
            Value::Arr(v) => v.iter().any(Value::has_bare_word),
            Value::Obj(m) => m.iter().any(|(_, v)| v.has_bare_word()),
            _ => false,
        }
    }
}

fn text(buf: &[u8], s: Str<'_>, scratch: &[u8]) -> String {
    let bytes = match s {
        Str::Raw(b) => b,
        Str::Escaped => scratch,
    };
    let _ = buf;
    String::from_utf8_lossy(bytes).into_owned()
}

/// Parses one value. Depth beyond `MAX_DEPTH` is rejected as malformed.
pub fn parse(buf: &[u8], pos: &mut usize) -> Res<Value> {
    let mut scratch = Vec::new();
    parse_at(buf, pos, 0, &mut scratch)
}

fn parse_at(buf: &[u8], pos: &mut usize, depth: usize, scratch: &mut Vec<u8>) -> Res<Value> {
    if depth > MAX_DEPTH {
        return Err(Stop::Bad(*pos));
    }
    match json::peek(buf, pos)? {
        b'"' => {
            let s = json::string(buf, pos, scratch)?;
            Ok(Value::Str(text(buf, s, scratch)))
        }
        b'{' => {
            *pos += 1;
            let mut members = Vec::new();
            loop {
                match json::peek(buf, pos)? {
                    b'}' => {
                        *pos += 1;
                        return Ok(Value::Obj(members));
                    }
                    b',' if !members.is_empty() => *pos += 1,
                    _ if members.is_empty() => {}
                    _ => return Err(Stop::Bad(*pos)),
                }
                if json::peek(buf, pos)? == b'}' {
                    continue;
                }
                let k = json::string(buf, pos, scratch)?;
                let key = text(buf, k, scratch);
                json::expect(buf, pos, b':')?;
                let v = parse_at(buf, pos, depth + 1, scratch)?;
                members.push((key, v));
            }
        }
        b'[' => {
            *pos += 1;
            let mut items = Vec::new();
            loop {
                match json::peek(buf, pos)? {
                    b']' => {
                        *pos += 1;
                        return Ok(Value::Arr(items));
                    }
                    b',' if !items.is_empty() => *pos += 1,
                    _ if items.is_empty() => {}
                    _ => return Err(Stop::Bad(*pos)),
                }
                if json::peek(buf, pos)? == b']' {
                    continue;
                }
                items.push(parse_at(buf, pos, depth + 1, scratch)?);
            }
        }
        _ => {
            let t = json::scalar(buf, pos)?;
            let s = String::from_utf8_lossy(t).into_owned();
            Ok(match classify_scalar(t) {
                ScalarKind::Number => Value::Num(s),
                ScalarKind::True => Value::Bool(true),
                ScalarKind::False => Value::Bool(false),
                ScalarKind::Null => Value::Null,
                ScalarKind::BareWord => Value::Bare(s),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_nested_and_tolerates_bare_words() {
        let buf = br#"{"rank": 3, "ranks": [0, 1, ...], "x": N/A, "s": "a\nb"} "#;
        let mut p = 0;
        let v = parse(buf, &mut p).unwrap_or(Value::Null);
        assert_eq!(v.get("rank").and_then(Value::as_i64), Some(3));
        assert!(v.has_bare_word());
        assert_eq!(v.get("s"), Some(&Value::Str("a\nb".into())));
    }

    #[test]
    fn deep_nesting_is_rejected_not_overflowed() {
        let mut buf = vec![b'['; 10_000];
        buf.extend(vec![b']'; 10_000]);
        let mut p = 0;
        assert!(matches!(parse(&buf, &mut p), Err(Stop::Bad(_))));
    }
}
