//! The kernel plan without a device: overrides are honoured, defaults follow the adapter,
//! and a plan's pinned overrides give it back.

use sampler::Program;

use super::{KernelOverrides, KernelPlan};
use crate::device::{
    AdapterFeatures, AdapterLimits, AdapterReport, DeviceKind, DeviceMemory, DrawsOutput,
};
use crate::error::GpuError;
use crate::wgsl::tests::volatility;
use crate::wgsl::{
    DEFAULT_WORKGROUP_SIZE, DataPlacement, IndexChecks, Precision, SOFTWARE_LOOP_LIMIT,
    TapePlacement,
};

/// An adapter of `kind` with subgroups of `subgroups` (none where `None`) and mappable
/// primary buffers where `mappable`.
fn adapter(kind: DeviceKind, subgroups: Option<(u32, u32)>, mappable: bool) -> AdapterReport {
    AdapterReport {
        index: 0,
        name: format!("{kind}"),
        backend: "vulkan".to_owned(),
        kind,
        driver: String::new(),
        driver_info: String::new(),
        vendor: 0,
        device_id: 0,
        subgroup_sizes: subgroups.unwrap_or((4, 4)),
        features: AdapterFeatures {
            subgroup: subgroups.is_some(),
            mappable_primary_buffers: mappable,
            ..AdapterFeatures::default()
        },
        limits: AdapterLimits {
            max_buffer_size: 1 << 30,
            max_storage_buffer_binding_size: 128 << 20,
            max_compute_workgroup_storage_size: 32 << 10,
            max_compute_invocations_per_workgroup: 1024,
            max_compute_workgroups_per_dimension: 65535,
            ..AdapterLimits::default()
        },
        memory: DeviceMemory::Unknown,
    }
}

fn adapters() -> [AdapterReport; 3] {
    [
        adapter(DeviceKind::Discrete, Some((32, 32)), true),
        adapter(DeviceKind::Software, Some((4, 8)), false),
        adapter(DeviceKind::Integrated, None, false),
    ]
}

fn resolve(
    report: &AdapterReport,
    program: &Program,
    n_chains: usize,
    overrides: &KernelOverrides,
) -> Result<KernelPlan, GpuError> {
    KernelPlan::resolve(
        report,
        IndexChecks::Buffers,
        program,
        Precision::F32,
        n_chains,
        overrides,
    )
}

#[test]
fn pinned_plans_resolve_to_themselves_whatever_the_chains() {
    let overrides = [
        KernelOverrides::default(),
        KernelOverrides {
            placement: Some(TapePlacement::Storage),
            ..KernelOverrides::default()
        },
        KernelOverrides {
            lanes: Some(1),
            data: Some(DataPlacement::Storage),
            draws: DrawsOutput::Mapped,
            ..KernelOverrides::default()
        },
        KernelOverrides {
            workgroup_size: Some(128),
            checks: Some(IndexChecks::All),
            lockstep_width: Some(3),
            loop_limit: Some(1000),
            ..KernelOverrides::default()
        },
        KernelOverrides::logp_grad(None, None),
    ];
    for report in adapters() {
        for program in [volatility(100), volatility(5)] {
            for n_chains in [0, 1, 64, 8192, 65536] {
                for asked in &overrides {
                    let Ok(plan) = resolve(&report, &program, n_chains, asked) else {
                        panic!("{}: {asked:?} refused", report.name);
                    };
                    for other in [1, n_chains + 7] {
                        let again = resolve(&report, &program, other, &plan.pinned());
                        assert_eq!(again.ok(), Some(plan), "{}: {asked:?}", report.name);
                    }
                }
            }
        }
    }
}

#[test]
fn overrides_are_taken_as_given() {
    let [hardware, ..] = adapters();
    let program = volatility(100);
    let asked = KernelOverrides {
        placement: Some(TapePlacement::Interpreted),
        workgroup_size: Some(96),
        data: Some(DataPlacement::Workgroup),
        lanes: Some(4),
        checks: Some(IndexChecks::All),
        lockstep_width: Some(5),
        loop_limit: Some(77),
        storage_limit: Some(4096),
        draws: DrawsOutput::Copied,
    };
    let plan = resolve(&hardware, &program, 1000, &asked).expect("resolves");
    let shader = plan.shader;
    assert_eq!(shader.placement, TapePlacement::Interpreted);
    assert_eq!(shader.workgroup_size, 96);
    assert_eq!(shader.data, DataPlacement::Workgroup);
    assert_eq!(shader.lanes, 4);
    assert_eq!(shader.checks, IndexChecks::All);
    assert_eq!(shader.precision, Precision::F32);
    assert_eq!(plan.lockstep_width, 5);
    assert_eq!(plan.loop_limit, Some(77));
    assert_eq!(plan.storage_limit, 4096);
    assert_eq!(plan.draws, DrawsOutput::Copied);
    // A limit above the adapter's own leaves the adapter's.
    let above = KernelOverrides {
        storage_limit: Some(1 << 40),
        ..asked
    };
    let plan = resolve(&hardware, &program, 1000, &above).expect("resolves");
    assert_eq!(plan.storage_limit, 128 << 20);
}

#[test]
fn defaults_follow_the_adapter() {
    let [hardware, software, plain] = adapters();
    let program = volatility(100);
    let open = KernelOverrides::default();
    // 100 log-volatilities split across a whole subgroup where there are subgroups: a
    // lockstep group is then one chain, and its draws are written where the host maps them.
    let split = resolve(&hardware, &program, 64, &open).expect("resolves");
    assert_eq!(split.shader.lanes, 32);
    assert_eq!(split.lockstep_width, 1);
    assert_eq!(split.draws, DrawsOutput::Mapped);
    assert_eq!(split.shader.checks, IndexChecks::Buffers);
    assert_eq!(split.loop_limit, None);
    assert_eq!(split.storage_limit, 128 << 20);
    // Without subgroups, one invocation per chain, and the largest "subgroup" in lockstep.
    let whole = resolve(&plain, &program, 64, &open).expect("resolves");
    assert_eq!(whole.shader.lanes, 1);
    assert_eq!(whole.shader.workgroup_size, DEFAULT_WORKGROUP_SIZE);
    assert_eq!(whole.lockstep_width, 4);
    assert_eq!(whole.draws, DrawsOutput::Copied);
    // A storage tape keeps chains whole.
    let storage = KernelOverrides {
        placement: Some(TapePlacement::Storage),
        ..open
    };
    let plan = resolve(&hardware, &program, 64, &storage).expect("resolves");
    assert_eq!(plan.shader.lanes, 1);
    assert_eq!(plan.lockstep_width, 32);
    // A software device caps loops; a lower cap asked for wins, a higher one does not.
    let capped = |loop_limit| {
        let asked = KernelOverrides { loop_limit, ..open };
        resolve(&software, &program, 64, &asked).map(|plan| plan.loop_limit)
    };
    assert_eq!(capped(None).ok(), Some(Some(SOFTWARE_LOOP_LIMIT)));
    assert_eq!(capped(Some(10)).ok(), Some(Some(10)));
    assert_eq!(
        capped(Some(SOFTWARE_LOOP_LIMIT + 1)).ok(),
        Some(Some(SOFTWARE_LOOP_LIMIT))
    );
    // The log-density kernel keeps one workgroup size whatever the points.
    let logp_grad = KernelOverrides::logp_grad(None, None);
    for n_chains in [0, 65536] {
        let plan = resolve(&hardware, &program, n_chains, &logp_grad).expect("resolves");
        assert_eq!(plan.shader.workgroup_size, DEFAULT_WORKGROUP_SIZE);
    }
}

#[test]
fn split_chains_need_subgroups() {
    let [.., plain] = adapters();
    let asked = KernelOverrides {
        lanes: Some(2),
        ..KernelOverrides::default()
    };
    let refused = resolve(&plain, &volatility(100), 64, &asked);
    assert!(
        matches!(refused, Err(GpuError::SubgroupUnsupported { .. })),
        "{refused:?}"
    );
}
