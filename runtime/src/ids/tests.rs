//! Node names: construction, parsing and the characters they refuse.

use super::*;

#[test]
fn node_name_joins_and_splits_short_and_host() {
    let name = NodeName::new("worker-1", "10.0.0.7").unwrap();
    assert_eq!(name.as_str(), "worker-1@10.0.0.7");
    assert_eq!(name.short(), "worker-1");
    assert_eq!(name.host(), "10.0.0.7");
    assert_eq!("worker-1@10.0.0.7".parse::<NodeName>().unwrap(), name);
}

#[test]
fn node_name_refuses_bad_parts() {
    for short in ["", "a b", "a@b", "ünï", &"x".repeat(MAX_SHORT_NAME_LEN + 1)] {
        assert!(
            matches!(NodeName::new(short, "h"), Err(NodeNameError::Short { .. })),
            "{short:?}"
        );
    }
    for host in ["", "a@b", "h h", "h\n"] {
        assert!(
            matches!(NodeName::new("a", host), Err(NodeNameError::Host { .. })),
            "{host:?}"
        );
    }
    assert!(matches!(
        "nohost".parse::<NodeName>(),
        Err(NodeNameError::MissingHost { .. })
    ));
}

#[test]
fn fresh_ids_differ_and_print_as_hex() {
    let ids: std::collections::HashSet<u64> = (0..1000).map(|_| fresh_u64()).collect();
    assert_eq!(ids.len(), 1000);
    assert_eq!(JobId(0xab).to_string(), "00000000000000ab");
    assert_eq!(TaskId(u64::MAX).to_string(), "ffffffffffffffff");
}
