//! Kernel (a) used directly: [`FusedLeapfrog`] keeps a fused-kernel session open on a device
//! and runs K leapfrog steps of N chains per call, returning every step's state. The fused
//! driver uses the same session type; tests check the pairing of each step's log density and
//! gradient with its position, and benchmarks time the round trip of a small dispatch.

use std::time::Duration;

use crate::device::fused::{FusedCommand, FusedOpen, FusedReply, FusedRun, StepRole};
use crate::device::nuts::SessionId;
use crate::device::{GpuDevice, KernelOverrides, ModelKey};
use crate::error::GpuError;

/// Where each chain starts and how it steps.
#[derive(Clone, Debug, PartialEq)]
pub struct LeapfrogStart {
    /// Steps to run (at most the session's `max_steps`).
    pub n_steps: usize,
    /// The diagonal inverse metric.
    pub inv_metric: Vec<f64>,
    /// One signed step size per chain; 0 leaves a chain idle.
    pub step_size: Vec<f64>,
    /// Positions, chain after chain (`q[c * dim + j]`).
    pub q: Vec<f64>,
    /// Momenta, chain after chain.
    pub p: Vec<f64>,
    /// Gradients of the log density at `q`, chain after chain.
    pub g: Vec<f64>,
}

/// Every step's state: after step `k` (0-based) chain `c` is at
/// `q[(k * n_chains + c) * dim ..][..dim]` with momentum `p[..]`, and `logp[k * n_chains + c]`
/// and `g[..]` are the log density and gradient at that same position.
#[derive(Clone, Debug, PartialEq)]
pub struct LeapfrogSteps {
    /// Chains.
    pub n_chains: usize,
    /// Coordinates per chain.
    pub dim: usize,
    /// Steps run.
    pub n_steps: usize,
    /// Positions.
    pub q: Vec<f64>,
    /// Momenta.
    pub p: Vec<f64>,
    /// Gradients.
    pub g: Vec<f64>,
    /// Log densities.
    pub logp: Vec<f64>,
    /// From submission to readable results on the device thread.
    pub device_time: Duration,
}

/// An open fused-kernel session. Closed when dropped.
#[derive(Debug)]
pub struct FusedLeapfrog<'a> {
    device: &'a GpuDevice,
    session: SessionId,
    n_chains: usize,
}

impl<'a> FusedLeapfrog<'a> {
    /// Opens a session for `n_chains` chains of the uploaded model `model`, up to
    /// `max_steps` steps per call (compiles the kernel on first use).
    pub fn open(
        device: &'a GpuDevice,
        model: ModelKey,
        n_chains: usize,
        max_steps: usize,
    ) -> Result<FusedLeapfrog<'a>, GpuError> {
        let reply = device
            .fused(FusedCommand::Open(FusedOpen {
                model,
                n_chains,
                max_steps,
                overrides: KernelOverrides::default(),
            }))
            .wait()?;
        match reply {
            FusedReply::Opened(session) => Ok(FusedLeapfrog {
                device,
                session,
                n_chains,
            }),
            _ => Err(GpuError::Device {
                operation: "fused session",
                message: "the device thread answered a different request".into(),
            }),
        }
    }

    /// Runs `start.n_steps` steps of every chain; blocks until the states are back.
    pub fn run(&self, start: &LeapfrogStart) -> Result<LeapfrogSteps, GpuError> {
        let reply = self
            .device
            .fused(FusedCommand::Run(
                self.session,
                FusedRun {
                    n_steps: start.n_steps,
                    metric: Some(start.inv_metric.clone()),
                    eps: start.step_size.clone(),
                    q: start.q.clone(),
                    p: start.p.clone(),
                    g: start.g.clone(),
                },
            ))
            .wait()?;
        let FusedReply::Batch(batch) = reply else {
            return Err(GpuError::Device {
                operation: "fused session",
                message: "the device thread answered a different request".into(),
            });
        };
        let (n, dim, k) = (self.n_chains, batch.dim, batch.n_steps);
        let mut steps = LeapfrogSteps {
            n_chains: n,
            dim,
            n_steps: k,
            q: vec![0.0; k * n * dim],
            p: vec![0.0; k * n * dim],
            g: vec![0.0; k * n * dim],
            logp: vec![0.0; k * n],
            device_time: batch.elapsed,
        };
        for step in 0..k {
            for c in 0..n {
                let at = (step * n + c) * dim;
                batch.copy_to(step, StepRole::Q, c, &mut steps.q[at..at + dim]);
                batch.copy_to(step, StepRole::P, c, &mut steps.p[at..at + dim]);
                batch.copy_to(step, StepRole::G, c, &mut steps.g[at..at + dim]);
                steps.logp[step * n + c] = batch.logp(step, c);
            }
        }
        Ok(steps)
    }
}

impl Drop for FusedLeapfrog<'_> {
    fn drop(&mut self) {
        let _ = self.device.fused(FusedCommand::Close(self.session)).wait();
    }
}
