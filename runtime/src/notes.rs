//! Notes on how a job's chains ran that its user should read: where a GPU task ran, in
//! which precision and why, or why a GPU node sampled on its CPU instead. A pool reports one
//! with a run's first finished chain (`WireChainDone::ran_on`), the coordinator keeps them
//! with the job and sends them with every poll answer (`JobReply::Events::notes`), and the
//! client keeps them with the outcome ([`crate::JobOutcome::notes`]).
//!
//! Bounded wherever they are kept ([`RunNotes`]): at most [`MAX_NOTES`], each at most
//! [`MAX_NOTE_BYTES`] (cut on a character boundary), each node's text once. A job of
//! thousands of GPU tasks says the same few things: the first ones are what to read.

use std::fmt;

use crate::ids::NodeName;
use crate::wire::WireRunNote;

/// Most notes kept with a job.
pub const MAX_NOTES: usize = 8;

/// Longest note, in bytes (a longer one is cut, ending in `…`).
pub const MAX_NOTE_BYTES: usize = 512;

/// What ends a note that was cut.
const CUT: char = '…';

/// A note on how some of a job's chains ran on one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunNote {
    /// The node.
    pub node: NodeName,
    /// What it said: `GPU gpu0 (NVIDIA H200) f64 (auto: ...)`, or `CPU (the GPU refused the
    /// model): ...`.
    pub text: String,
}

impl fmt::Display for RunNote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ran on node {}: {}", self.node, self.text)
    }
}

/// A job's notes, bounded and each once (see the module documentation).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RunNotes {
    notes: Vec<RunNote>,
}

impl RunNotes {
    /// Keeps `text` from `node`, made one line and cut to [`MAX_NOTE_BYTES`]; unless the same
    /// note is kept already or [`MAX_NOTES`] are. Returns whether it was kept.
    pub(crate) fn add(&mut self, node: &NodeName, text: &str) -> bool {
        if self.notes.len() >= MAX_NOTES {
            return false;
        }
        let text = bounded(text);
        if self.notes.iter().any(|n| n.node == *node && n.text == text) {
            return false;
        }
        self.notes.push(RunNote {
            node: node.clone(),
            text,
        });
        true
    }

    /// The notes as they travel.
    pub(crate) fn to_wire(&self) -> Vec<WireRunNote> {
        self.notes
            .iter()
            .map(|note| WireRunNote {
                node: note.node.to_string(),
                text: note.text.clone(),
            })
            .collect()
    }

    /// The notes, oldest first.
    pub(crate) fn into_vec(self) -> Vec<RunNote> {
        self.notes
    }
}

/// `text` on one line (control characters as spaces), cut to at most [`MAX_NOTE_BYTES`] on
/// a character boundary, ending in `…` when cut.
pub(crate) fn bounded(text: &str) -> String {
    let line = |s: &str| -> String {
        s.chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect()
    };
    if text.len() <= MAX_NOTE_BYTES {
        return line(text);
    }
    let mut end = MAX_NOTE_BYTES - CUT.len_utf8();
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let mut cut = line(&text[..end]);
    cut.push(CUT);
    cut
}

#[cfg(test)]
mod tests;
