//! Top-level metadata members (`deviceProperties`, `distributedInfo`, `baseTimeNanoseconds`, …)
//! read into [`TraceMeta`], each value checked for range.

use super::*;

/// A metadata value as text, for messages.
pub(super) fn value_text(v: &Value) -> String {
    match v {
        Value::Num(t) | Value::Str(t) | Value::Bare(t) => t.chars().take(40).collect(),
        Value::Bool(b) => b.to_string(),
        Value::Null => "null".to_string(),
        Value::Arr(_) => "an array".to_string(),
        Value::Obj(_) => "an object".to_string(),
    }
}

pub(super) fn read_distributed(v: &Value) -> DistributedInfo {
    let text = |k: &str| v.get(k).and_then(Value::as_text);
    let pg_config = v
        .get("pg_config")
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .map(|pg| ProcessGroup {
                    name: pg.get("pg_name").and_then(Value::as_text).unwrap_or_default(),
                    desc: pg.get("pg_desc").and_then(Value::as_text),
                    backend_config: pg.get("backend_config").and_then(Value::as_text),
                    size: pg.get("pg_size").and_then(Value::as_i64),
                    ranks: pg
                        .get("ranks")
                        .and_then(Value::as_array)
                        .map(|r| r.iter().filter_map(Value::as_i64).collect())
                        .unwrap_or_default(),
                })
                .collect()
        })
        .unwrap_or_default();
    DistributedInfo {
        rank: v.get("rank").and_then(Value::as_i64),
        world_size: v.get("world_size").and_then(Value::as_i64),
        backend: text("backend"),
        pg_count: v.get("pg_count").and_then(Value::as_i64),
        pg_config,
        nccl_version: text("nccl_version"),
    }
}

pub(super) fn read_device(d: &Value) -> Device {
    let major = d.get("computeMajor").and_then(Value::as_i64);
    let minor = d.get("computeMinor").and_then(Value::as_i64);
    Device {
        id: d.get("id").and_then(Value::as_i64).unwrap_or(-1),
        name: d.get("name").and_then(Value::as_text).unwrap_or_default(),
        total_global_mem: d.get("totalGlobalMem").and_then(Value::as_i64),
        num_sms: d.get("numSms").and_then(Value::as_i64),
        compute_capability: match (major, minor) {
            (Some(a), Some(b)) => Some(format!("{a}.{b}")),
            _ => None,
        },
    }
}

impl TraceParser {
    pub(super) fn apply_meta(&mut self, key: &str, v: &Value, offset: u64) {
        if v.has_bare_word() {
            self.diag(DiagKind::BareWord, Some(offset), || {
                format!("a bare word (such as N/A or ...) inside top-level `{key}` was read as null")
            });
        }
        let meta = &mut self.out.meta;
        match key {
            "schemaVersion" => meta.schema_version = v.as_i64(),
            "baseTimeNanoseconds" => {
                meta.base_time_ns = v.as_i64();
                match meta.base_time_ns {
                    None => self.diag(DiagKind::BadMetadata, Some(offset), || {
                        "`baseTimeNanoseconds` is not an integer; times are taken as written".to_string()
                    }),
                    Some(b) if !(0..=MAX_TIME_NS).contains(&b) => {
                        meta.base_time_ns = None;
                        self.diag(DiagKind::OutOfRange, Some(offset), || {
                            format!("`baseTimeNanoseconds` {b} is outside 0..={MAX_TIME_NS} (it would push every event past the end of 64-bit time); times are taken as written")
                        });
                    }
                    Some(_) => {}
                }
            }
            "displayTimeUnit" => {
                meta.display_time_unit = v.as_text();
                if meta.display_time_unit.as_deref() == Some("ns") {
                    self.diag(DiagKind::DisplayTimeUnitIgnored, Some(offset), || {
                        "`displayTimeUnit` is \"ns\", but Kineto writes `ts` and `dur` in microseconds regardless (it only sets the viewer's axis labels); read as microseconds".to_string()
                    });
                }
            }
            "traceName" => meta.trace_name = v.as_text(),
            "host_name" | "hostname" => meta.host_name = v.as_text(),
            "distributedInfo" => {
                if let Value::Obj(_) = v {
                    let mut d = read_distributed(v);
                    let raw = |k: &str| v.get(k).filter(|x| **x != Value::Null).map(value_text);
                    if let Some(r) = raw("rank") {
                        if d.rank.is_none_or(|x| u32::try_from(x).is_err()) {
                            d.rank = None;
                            self.diag(DiagKind::OutOfRange, Some(offset), || {
                                format!(
                                    "`distributedInfo.rank` {r} is not a rank (0 to {}); ignored",
                                    u32::MAX
                                )
                            });
                        }
                    }
                    if let Some(w) = raw("world_size") {
                        if d.world_size.is_none_or(|x| !(1..=MAX_WORLD_SIZE).contains(&x)) {
                            d.world_size = None;
                            self.diag(DiagKind::OutOfRange, Some(offset), || {
                                format!("`distributedInfo.world_size` {w} is not a world size (1 to {MAX_WORLD_SIZE}); ignored")
                            });
                        }
                    }
                    if let (Some(r), Some(w)) = (d.rank, d.world_size) {
                        if r >= w {
                            self.diag(DiagKind::OutOfRange, Some(offset), || {
                                format!(
                                    "`distributedInfo.rank` {r} is not below its `world_size` {w}; both kept"
                                )
                            });
                        }
                    }
                    self.out.meta.distributed = Some(d);
                } else {
                    self.diag(DiagKind::BadMetadata, Some(offset), || {
                        "`distributedInfo` is not an object; ignored".to_string()
                    });
                }
            }
            "deviceProperties" => match v.as_array() {
                Some(items) => {
                    meta.devices = items.iter().map(read_device).collect();
                }
                None => self.diag(DiagKind::BadMetadata, Some(offset), || {
                    "`deviceProperties` is not an array; ignored".to_string()
                }),
            },
            _ => {}
        }
    }

    // ---- events ----------------------------------------------------------------------
}
