//! The choice of adapters, without actors or devices (the restart rules are
//! `supervision::Restarts`'s, tested there).

use super::AdapterSelection;
use super::supervisor::choose_adapters;
use crate::device::{AdapterFeatures, AdapterLimits, AdapterReport, DeviceKind, DeviceMemory};

fn adapter(index: usize, name: &str, kind: DeviceKind) -> AdapterReport {
    AdapterReport {
        index,
        name: name.to_owned(),
        backend: "vulkan".to_owned(),
        kind,
        driver: String::new(),
        driver_info: String::new(),
        vendor: 0,
        device_id: 0,
        subgroup_sizes: (32, 32),
        features: AdapterFeatures::default(),
        limits: AdapterLimits::default(),
        memory: DeviceMemory::Unknown,
    }
}

fn names(chosen: &Result<Vec<AdapterReport>, String>) -> Vec<&str> {
    chosen
        .as_ref()
        .map(|adapters| adapters.iter().map(|a| a.name.as_str()).collect())
        .unwrap_or_default()
}

#[test]
fn hardware_adapters_are_chosen_over_software_ones() {
    let listed = vec![
        adapter(0, "H100", DeviceKind::Discrete),
        adapter(1, "iGPU", DeviceKind::Integrated),
        adapter(2, "llvmpipe", DeviceKind::Software),
    ];
    let chosen = choose_adapters(&AdapterSelection::All, true, Ok(listed));
    assert_eq!(names(&chosen), ["H100", "iGPU"]);
}

#[test]
fn a_software_adapter_is_used_only_when_allowed_and_alone() {
    let listed = vec![
        adapter(0, "llvmpipe", DeviceKind::Software),
        adapter(1, "llvmpipe", DeviceKind::Software),
    ];
    let allowed = choose_adapters(&AdapterSelection::All, true, Ok(listed.clone()));
    assert_eq!(names(&allowed), ["llvmpipe"]);
    let refused = choose_adapters(&AdapterSelection::All, false, Ok(listed));
    let why = refused.expect_err("software refused");
    assert!(why.contains("only the software device llvmpipe"), "{why}");
}

#[test]
fn no_adapter_no_selection_or_a_bad_index_say_why() {
    let none = choose_adapters(&AdapterSelection::All, true, Ok(Vec::new()));
    assert!(none.expect_err("none").contains("no GPU adapter"));
    let listed = vec![adapter(0, "H100", DeviceKind::Discrete)];
    let off = choose_adapters(&AdapterSelection::None, true, Ok(listed.clone()));
    assert!(off.expect_err("off").contains("switched off"));
    let bad = choose_adapters(&AdapterSelection::Only(vec![3]), true, Ok(listed.clone()));
    assert!(bad.expect_err("bad index").contains("no GPU adapter 3"));
    let failed = choose_adapters(&AdapterSelection::All, true, Err("no Vulkan".to_owned()));
    assert_eq!(failed.expect_err("failed"), "no Vulkan");
    let only = choose_adapters(&AdapterSelection::Only(vec![0]), false, Ok(listed));
    assert_eq!(names(&only), ["H100"]);
}
