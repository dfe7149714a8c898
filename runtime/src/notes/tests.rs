//! A job's notes: cut on a character boundary, each once, at most a few.

use super::*;

fn node(short: &str) -> NodeName {
    NodeName::new(short, "127.0.0.1").unwrap()
}

#[test]
fn a_long_note_is_cut_on_a_character_boundary() {
    // Three bytes a character: no multiple of three reaches the limit less the mark exactly.
    let long = "€".repeat(MAX_NOTE_BYTES);
    let cut = bounded(&long);
    assert!(cut.len() <= MAX_NOTE_BYTES, "{}", cut.len());
    assert!(cut.len() > MAX_NOTE_BYTES - 6, "{}", cut.len());
    assert!(cut.ends_with('…'));
    assert!(cut.trim_end_matches('…').chars().all(|c| c == '€'));

    let exact = "x".repeat(MAX_NOTE_BYTES);
    assert_eq!(bounded(&exact), exact, "a note at the limit is kept whole");
    let over = "x".repeat(MAX_NOTE_BYTES + 1);
    assert_eq!(bounded(&over).len(), MAX_NOTE_BYTES);
}

#[test]
fn a_note_is_one_line() {
    assert_eq!(bounded("GPU gpu0\nf32\t(auto)"), "GPU gpu0 f32 (auto)");
}

#[test]
fn each_note_is_kept_once_per_node() {
    let mut notes = RunNotes::default();
    let text = "GPU gpu0 (llvmpipe) f32 (auto: within tolerance)";
    assert!(notes.add(&node("g"), text));
    assert!(!notes.add(&node("g"), text), "the same note twice");
    assert!(notes.add(&node("h"), text), "another node's");
    assert!(notes.add(&node("g"), "GPU gpu0 (llvmpipe) f64 (auto: ...)"));
    // Notes equal once cut are one note.
    let long = "y".repeat(2 * MAX_NOTE_BYTES);
    assert!(notes.add(&node("g"), &long));
    assert!(!notes.add(&node("g"), &format!("{long}z")));
    let kept: Vec<(String, usize)> = notes
        .into_vec()
        .iter()
        .map(|n| (n.node.to_string(), n.text.len()))
        .collect();
    assert_eq!(
        kept,
        [
            ("g@127.0.0.1".to_owned(), text.len()),
            ("h@127.0.0.1".to_owned(), text.len()),
            ("g@127.0.0.1".to_owned(), 35),
            ("g@127.0.0.1".to_owned(), MAX_NOTE_BYTES),
        ]
    );
}

#[test]
fn at_most_max_notes_are_kept_the_first_ones() {
    let mut notes = RunNotes::default();
    for i in 0..2 * MAX_NOTES {
        let kept = notes.add(&node("g"), &format!("note {i}"));
        assert_eq!(kept, i < MAX_NOTES, "note {i}");
    }
    let texts: Vec<String> = notes.into_vec().into_iter().map(|n| n.text).collect();
    let first: Vec<String> = (0..MAX_NOTES).map(|i| format!("note {i}")).collect();
    assert_eq!(texts, first);
}

#[test]
fn notes_travel_as_node_and_text() {
    let mut notes = RunNotes::default();
    notes.add(
        &node("g"),
        "CPU (the GPU refused the model): the model needs f64",
    );
    let wire = notes.to_wire();
    assert_eq!(
        wire,
        [WireRunNote {
            node: "g@127.0.0.1".into(),
            text: "CPU (the GPU refused the model): the model needs f64".into(),
        }]
    );
    assert_eq!(
        notes.into_vec()[0].to_string(),
        "ran on node g@127.0.0.1: CPU (the GPU refused the model): the model needs f64"
    );
}
