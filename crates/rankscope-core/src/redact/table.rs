//! Redaction of the columnar tables (`rankscope export --redact`, docs/columnar.md): each
//! table is built from the redacted analysis or the redacted job ([`super::job`]), so its
//! names are already tokens; then every text cell of a column that holds the user's text
//! (names, categories, lanes, groups, messages) passes [`Redactor::string`] once more, as
//! every text the other exports write passes [`Redactor::text`]. Columns of rankscope's own
//! vocabulary (classes, kinds, severities, sources, roles) and every number are left as they
//! are: the figures of a redacted table equal the plain one's.

use super::Redactor;
use crate::export::columnar::{tables, ColumnData, Table};
use crate::model::StringTable;
use crate::normalize::job::{Job, RankEntry};

/// The text columns whose values are rankscope's own words (enum values, lists of numbers),
/// in every table that has them: never the user's, so never hashed (a user's annotation
/// called `compute` must not turn the `class` column's `compute` into a token).
pub const VOCABULARY_COLUMNS: [&str; 10] =
    ["source", "class", "collective", "kind", "severity", "bw_basis", "role", "role_from", "ranks", "steps"];

/// Every text cell of `t` outside [`VOCABULARY_COLUMNS`] redacted ([`Redactor::string`]).
pub fn redact_table(r: &mut Redactor, t: &mut Table) {
    for c in &mut t.columns {
        if VOCABULARY_COLUMNS.contains(&c.name.as_str()) {
            continue;
        }
        if let ColumnData::Utf8(v) = &mut c.data {
            v.iter_mut().flatten().for_each(|s| r.string(s));
        }
    }
}

/// One rank's `events` table as `rankscope export --redact` writes it: the rank's names
/// (gathered into `r` before, [`super::job::gather_job`]) renamed in a copy of its string
/// table as [`super::job::redact_job`] renames a job's, the table built on it, then its text
/// passed once more ([`redact_table`]). Only the string table is copied, never the events.
pub fn redacted_events(
    r: &mut Redactor,
    e: &RankEntry,
    strings: &StringTable,
    rank: u32,
    offset_ns: i64,
) -> Table {
    let mut names = Job { strings: strings.clone(), ..Job::default() };
    super::job::redact_job(r, &mut names);
    let mut t = tables::events(e, &names.strings, rank, offset_ns);
    redact_table(r, &mut t);
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::columnar::{Column, TableName};
    use crate::redact::{Key, Kind};

    #[test]
    fn user_text_becomes_tokens_and_vocabulary_and_numbers_stay() {
        let mut r = Redactor::new(Key::from_phrase("k"));
        r.hide("## my_block ##", Kind::Name);
        r.hide("compute", Kind::Name);
        let mut t = Table {
            name: TableName::Events,
            columns: vec![
                Column::new(
                    "name",
                    ColumnData::Utf8(vec![Some("## my_block ##".into()), Some("aten::mm".into()), None]),
                ),
                Column::new("class", ColumnData::Utf8(vec![Some("compute".into()), None, None])),
                Column::new(
                    "lane",
                    ColumnData::Utf8(vec![Some("thread 7 in /home/alice/run/x.py".into()), None, None]),
                ),
                Column::new("dur_ns", ColumnData::I64(vec![Some(5), None, Some(7)])),
            ],
        };
        let before = t.clone();
        redact_table(&mut r, &mut t);
        let ColumnData::Utf8(names) = &t.columns[0].data else { panic!("a text column") };
        assert!(names[0].as_deref().is_some_and(|n| n.starts_with("name-")), "{names:?}");
        assert_eq!(names[1].as_deref(), Some("aten::mm"));
        assert_eq!(names[2], None);
        assert_eq!(t.columns[1], before.columns[1], "rankscope's class stays");
        let ColumnData::Utf8(lanes) = &t.columns[2].data else { panic!("a text column") };
        assert!(
            lanes[0].as_deref().is_some_and(|l| !l.contains("alice") && l.contains("path-")),
            "{lanes:?}"
        );
        assert_eq!(t.columns[3], before.columns[3]);
    }
}
