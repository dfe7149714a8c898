//! The typed id of a supervisor's child.

use std::fmt;

/// Names a child of a supervisor (`membership`, `gpu`, ...), unique among its siblings.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct ChildId(String);

impl ChildId {
    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<&str> for ChildId {
    fn from(id: &str) -> Self {
        Self(id.to_owned())
    }
}

impl From<String> for ChildId {
    fn from(id: String) -> Self {
        Self(id)
    }
}

impl fmt::Display for ChildId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
