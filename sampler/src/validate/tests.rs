//! Validation errors name the offending node. (Being written.)
