//! The kernel plan: the definite shape of a run's kernels on one device (their shader
//! options, the lockstep width of the statistics, the loop limit and where draws go),
//! resolved by one function, [`KernelPlan::resolve`], from the device, the program, the
//! chains and the caller's [`KernelOverrides`]. Every default of the GPU kernels' shape is
//! chosen there and nowhere else: the device thread resolves its sessions' shaders with it,
//! the sampling drivers their lockstep width and loop budget, and benchmarks print its answer
//! ([`super::GpuDevice::kernel_plan`]).

#[cfg(test)]
mod tests;

use sampler::Program;

use super::{AdapterReport, DrawsOutput};
use crate::error::GpuError;
use crate::wgsl::{self, DataPlacement, IndexChecks, Precision, ShaderOptions, TapePlacement};

/// Choices a caller makes instead of the kernel plan's defaults, for benchmarks and tests:
/// each `None` (and [`DrawsOutput::Auto`]) leaves it to [`KernelPlan`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct KernelOverrides {
    /// Where the model's tapes live; `None` for [`TapePlacement::choose_for_lanes`].
    pub placement: Option<TapePlacement>,
    /// Invocations per workgroup; `None` for [`wgsl::default_workgroup_size`].
    pub workgroup_size: Option<u32>,
    /// Where the kernels read the model's data; `None` for workgroup memory when it fits
    /// the adapter ([`DataPlacement::choose_for_lanes`]).
    pub data: Option<DataPlacement>,
    /// Invocations per chain; `None` for the adapter's default ([`wgsl::choose_lanes`]) for
    /// the chains ([`wgsl::lanes_for_chains`]), or 1 with a storage tape.
    pub lanes: Option<u32>,
    /// Which array accesses the kernels check; `None` for the backend's default
    /// ([`IndexChecks::default_for`]).
    pub checks: Option<IndexChecks>,
    /// Chains that execute in lockstep, for the lockstep statistics; `None` for the
    /// adapter's largest subgroup size over the invocations per chain.
    pub lockstep_width: Option<u32>,
    /// Run as on a device that stops loops after this many iterations per invocation (the
    /// budgets of [`wgsl::LoopBudget`], for tests of them on any device), where that is lower
    /// than the device's own cap; `None` for the device's own.
    pub loop_limit: Option<u64>,
    /// Run as on a device whose storage bindings hold at most this many bytes, where that
    /// is lower than the device's own limit (a test hook: a run whose chains' buffers do not
    /// fit runs in pieces, `sampling/pieces.rs`, and lavapipe cannot allocate the GiBs that
    /// would show it); `None` for the device's own.
    pub storage_limit: Option<u64>,
    /// Where the NUTS kernel writes the draws of sampling dispatches.
    pub draws: DrawsOutput,
}

impl KernelOverrides {
    /// What a [`super::LogpGradRequest`] asks: its tape placement and lanes, and one
    /// workgroup size whatever the number of points, so that a retry of a few initial points
    /// reuses the pipeline.
    pub(crate) fn logp_grad(
        placement: Option<TapePlacement>,
        lanes: Option<u32>,
    ) -> KernelOverrides {
        KernelOverrides {
            placement,
            lanes,
            workgroup_size: Some(wgsl::DEFAULT_WORKGROUP_SIZE),
            ..KernelOverrides::default()
        }
    }
}

/// The resolved shape of the kernels of a run of some chains of one program on one device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelPlan {
    /// How the kernels are generated: precision, lanes per chain, tape and data placement,
    /// workgroup size and index checks.
    pub shader: ShaderOptions,
    /// Chains that execute in lockstep, for the lockstep statistics (at least 1).
    pub lockstep_width: u32,
    /// The most loop iterations one invocation may take: the device's cap
    /// ([`AdapterReport::loop_limit`]) or a lower one asked for; `None` for no cap.
    pub loop_limit: Option<u64>,
    /// The largest buffer a session binds as storage, bytes: the device's binding and buffer
    /// limits, or a lower one asked for ([`KernelOverrides::storage_limit`]).
    pub storage_limit: u64,
    /// Where the NUTS kernel writes the draws of sampling dispatches:
    /// [`DrawsOutput::Mapped`] or [`DrawsOutput::Copied`].
    pub draws: DrawsOutput,
}

impl KernelPlan {
    /// The plan of kernels over `n_chains` chains of `program` in `precision` on the adapter
    /// `report`, whose backend checks `default_checks` by default: what `overrides` fixes,
    /// else the default.
    ///
    /// # Errors
    ///
    /// [`GpuError::SubgroupUnsupported`] for chains split across lanes on an adapter without
    /// subgroup operations.
    pub(crate) fn resolve(
        report: &AdapterReport,
        default_checks: IndexChecks,
        program: &Program,
        precision: Precision,
        n_chains: usize,
        overrides: &KernelOverrides,
    ) -> Result<KernelPlan, GpuError> {
        let lanes = overrides
            .lanes
            .unwrap_or_else(|| default_lanes(report, program, overrides.placement, n_chains));
        if lanes > 1 && !report.features.subgroup {
            return Err(GpuError::SubgroupUnsupported {
                adapter: report.name.clone(),
            });
        }
        let workgroup_size = overrides.workgroup_size.unwrap_or_else(|| {
            wgsl::default_workgroup_size(
                n_chains,
                lanes,
                report.limits.max_compute_invocations_per_workgroup,
            )
        });
        let shader = ShaderOptions {
            precision,
            lanes,
            placement: overrides
                .placement
                .unwrap_or_else(|| TapePlacement::choose_for_lanes(program, lanes)),
            workgroup_size,
            data: overrides.data.unwrap_or_else(|| {
                DataPlacement::choose_for_lanes(
                    program,
                    precision,
                    report.limits.max_compute_workgroup_storage_size,
                    lanes,
                    workgroup_size,
                )
            }),
            checks: overrides.checks.unwrap_or(default_checks),
        };
        let lockstep_width = overrides
            .lockstep_width
            .unwrap_or(report.subgroup_sizes.1 / lanes.max(1))
            .max(1);
        let loop_limit = match (report.loop_limit(), overrides.loop_limit) {
            (Some(own), Some(asked)) => Some(own.min(asked)),
            (own, asked) => own.or(asked),
        };
        let own_storage = report
            .limits
            .max_storage_buffer_binding_size
            .min(report.limits.max_buffer_size);
        Ok(KernelPlan {
            shader,
            lockstep_width,
            loop_limit,
            storage_limit: overrides
                .storage_limit
                .map_or(own_storage, |asked| asked.min(own_storage)),
            draws: overrides
                .draws
                .resolve(lanes, report.features.mappable_primary_buffers),
        })
    }

    /// Overrides that ask for exactly this plan: resolved again on the same device, they give
    /// it back whatever the chains.
    pub fn pinned(&self) -> KernelOverrides {
        let shader = &self.shader;
        KernelOverrides {
            placement: Some(shader.placement),
            workgroup_size: Some(shader.workgroup_size),
            data: Some(shader.data),
            lanes: Some(shader.lanes),
            checks: Some(shader.checks),
            lockstep_width: Some(self.lockstep_width),
            loop_limit: self.loop_limit,
            storage_limit: Some(self.storage_limit),
            draws: self.draws,
        }
    }
}

/// Invocations per chain of `n_chains` chains on this adapter when a request leaves it open:
/// [`wgsl::choose_lanes`] with the adapter's subgroup support and smallest subgroup, then
/// [`wgsl::lanes_for_chains`] for the chains; 1 when the request asks for a storage tape
/// (split chains need a private one).
fn default_lanes(
    report: &AdapterReport,
    program: &Program,
    placement: Option<TapePlacement>,
    n_chains: usize,
) -> u32 {
    if placement.is_some_and(TapePlacement::in_storage) {
        return 1;
    }
    let lanes = wgsl::choose_lanes(program, report.features.subgroup, report.subgroup_sizes.0);
    wgsl::lanes_for_chains(program, lanes, n_chains)
}
