use super::*;

fn red() -> Redactor {
    Redactor::new(Key::from_phrase("test"))
}

#[test]
fn one_string_one_token_and_a_given_key_agrees_across_redactors() {
    let (mut a, mut b) = (red(), red());
    a.consider("## secret_block ##");
    b.consider("## secret_block ##");
    let t = a.exact("## secret_block ##").map(str::to_string);
    assert!(t.as_deref().is_some_and(|t| t.starts_with("name-")), "{t:?}");
    assert_eq!(t.as_deref(), b.exact("## secret_block ##"));
    let mut c = Redactor::new(Key::from_phrase("another"));
    c.consider("## secret_block ##");
    assert_ne!(t.as_deref(), c.exact("## secret_block ##"));
    a.consider("aten::mm");
    assert_eq!(a.exact("aten::mm"), None);
}

#[test]
fn text_replaces_whole_words_longest_first_and_paths_and_addresses() {
    let mut r = red();
    r.consider("nn.Module: SecretNet");
    r.consider("SecretNet");
    r.hide("node-17", Kind::Host);
    let t = r.text("Ranks 2 wait in `nn.Module: SecretNet` on node-17; SecretNetwork stays; see /home/alice/x/run.py and 10.1.2.3; https://pytorch.org/docs/x/y");
    assert!(
        !t.contains("SecretNet`")
            && !t.contains("node-17")
            && !t.contains("alice")
            && !t.contains("10.1.2.3"),
        "{t}"
    );
    assert!(t.contains("SecretNetwork"), "inside a longer word: {t}");
    assert!(t.contains("https://pytorch.org/docs/x/y"), "a URL is not a path: {t}");
    let long = r.exact("nn.Module: SecretNet").unwrap_or_default().to_string();
    assert!(t.contains(&format!("`{long}`")), "the longest match wins: {t}");
}

#[test]
fn markdown_and_json_spellings_are_replaced() {
    let mut r = red();
    r.consider("my_secret_block");
    let tok = r.exact("my_secret_block").unwrap_or_default().to_string();
    assert_eq!(r.text("a my\\_secret\\_block b"), format!("a {tok} b"));
    r.consider("say \"hi\" there");
    assert!(!r.text("x say \\\"hi\\\" there").contains("hi"));
}

#[test]
fn enum_words_come_back_out_of_the_hashed_set() {
    let mut r = red();
    r.hide("all_reduce", Kind::Name);
    assert!(r.exact("all_reduce").is_some());
    assert!(r.unhide("all_reduce"));
    assert_eq!(r.exact("all_reduce"), None);
    assert_eq!(r.text("an all_reduce"), "an all_reduce");
}

#[test]
fn args_keep_figures_and_public_values() {
    let mut r = red();
    let mut v: serde_json::Value = serde_json::from_str(
        r#"{"Input Dims": [[16, 13]], "Input type": ["float", "c10::BFloat16"], "Call stack": "/home/alice/m.py(3): f", "my_secret_key": "my_secret_value", "Process Group Description": "tp_secret_group", "External id": 7}"#,
    )
    .unwrap_or_default();
    job::redact_args(&mut r, &mut v);
    let s = v.to_string();
    for leak in ["alice", "my_secret", "tp_secret"] {
        assert!(!s.contains(leak), "{s}");
    }
    for kept in ["[[16,13]]", "c10::BFloat16", "\"External id\":7", "float"] {
        assert!(s.contains(kept), "{kept} in {s}");
    }
}

#[test]
fn statement_counts_by_kind() {
    let mut r = red();
    r.consider("SecretA");
    r.consider("/x/y/z.json");
    r.hide("h1", Kind::Host);
    r.consider("aten::add");
    r.removed("things", 2);
    let s = r.statement();
    assert_eq!(s.hashed.get(&Kind::Name), Some(&1));
    assert_eq!(s.hashed.get(&Kind::Path), Some(&1));
    assert_eq!(s.hashed.get(&Kind::Host), Some(&1));
    assert_eq!(s.kept_names, 1);
    assert!(s.markdown().contains("Removed: things (2)"));
}
