//! What membership knows about a node and tells its subscribers, and the conversions to and
//! from the wire forms (checked here, at the edge).

use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

use crate::ids::NodeName;
use crate::session::ConnectError;
use crate::transport::TlsProblem;
use crate::wire::{
    WireError, WireGpu, WireJoinError, WireMember, WireMemberState, WireMemberStatus, WireNodeInfo,
    WireResources, WireTlsProblem,
};

/// A cluster node: its name, the address peers dial, and what it offers.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeInfo {
    /// Full name, `short@host`.
    pub name: NodeName,
    /// The address peers dial.
    pub address: SocketAddr,
    /// What it can run.
    pub resources: NodeResources,
    /// It drains (shutting down): it finishes its running work and takes nothing new.
    pub draining: bool,
}

/// What a node can run, and how busy it is.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NodeResources {
    /// Chains it runs at once on its CPU cores (one per core).
    pub cpu_slots: u32,
    /// Its GPU adapters.
    pub gpus: Vec<GpuInfo>,
    /// Jobs running on it now (kept up to date by the job coordinator).
    pub running_jobs: u32,
}

/// Which GPU adapter a node may run its GPU pool on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GpuPolicy {
    /// None: the node does not look for adapters.
    Off,
    /// The best hardware adapter; a software one (lavapipe, llvmpipe) only when the node
    /// runs no CPU pool (`cpu_slots` 0): it runs on the CPU's cores, slower than the CPU
    /// pool does. The default.
    Auto,
    /// The best hardware adapter. A software one is listed but never used.
    Hardware,
    /// The best adapter, a software one when there is no other.
    AllowSoftware,
}

impl GpuPolicy {
    /// [`GpuPolicy::Auto`] made definite for a node with `cpu_slots`.
    fn resolve(self, cpu_slots: u32) -> GpuPolicy {
        match self {
            GpuPolicy::Auto if cpu_slots == 0 => GpuPolicy::AllowSoftware,
            GpuPolicy::Auto => GpuPolicy::Hardware,
            other => other,
        }
    }
}

impl NodeResources {
    /// This machine: `cpu_slots` (default: one per core) and, unless `gpus` is
    /// [`GpuPolicy::Off`], every Vulkan adapter `gpu_actor` finds (none when there is no
    /// driver), those the node's GPU supervisor will run workers on marked `in_use`.
    pub fn detect(cpu_slots: Option<u32>, gpus: GpuPolicy) -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let cpu_slots = cpu_slots.unwrap_or(u32::try_from(cores).unwrap_or(u32::MAX));
        let gpus = gpus.resolve(cpu_slots);
        let gpus = if gpus == GpuPolicy::Off {
            Vec::new()
        } else {
            match gpu_actor::enumerate_adapters() {
                Ok(adapters) => choose_gpu(
                    adapters
                        .into_iter()
                        .map(|adapter| GpuInfo {
                            software: adapter.is_software(),
                            in_use: false,
                            chains: 0,
                            adapter: adapter.name,
                            backend: adapter.backend,
                            memory_bytes: match adapter.memory {
                                gpu_actor::DeviceMemory::Known { device_local_bytes } => {
                                    Some(device_local_bytes)
                                }
                                gpu_actor::DeviceMemory::Unknown => None,
                            },
                        })
                        .collect(),
                    gpus,
                ),
                Err(error) => {
                    tracing::info!("no GPU: {error}");
                    Vec::new()
                }
            }
        };
        Self {
            cpu_slots,
            gpus,
            running_jobs: 0,
        }
    }

    /// The best adapter the node's GPU supervisor uses, if any: the node runs a GPU pool.
    pub fn gpu_in_use(&self) -> Option<&GpuInfo> {
        self.gpus.iter().find(|gpu| gpu.in_use)
    }

    /// Sets the chains each adapter runs now, from the GPU supervisor's load: `(position in
    /// `gpus`, chains)`; adapters not listed run none.
    pub(crate) fn set_gpu_load(&mut self, load: &[(usize, u32)]) {
        for gpu in &mut self.gpus {
            gpu.chains = 0;
        }
        for &(index, chains) in load {
            if let Some(gpu) = self.gpus.get_mut(index) {
                gpu.chains = chains;
            }
        }
    }
}

/// Marks the adapters the node's GPU supervisor will use among `adapters` (best first, as
/// `gpu_actor::enumerate_adapters` lists them), as the supervisor chooses them
/// (`gpu_actor::AdapterSelection::All`): every hardware adapter; the best software one
/// when there is none and `policy` allows it.
fn choose_gpu(mut adapters: Vec<GpuInfo>, policy: GpuPolicy) -> Vec<GpuInfo> {
    let hardware = adapters.iter().any(|gpu| !gpu.software);
    match policy {
        GpuPolicy::Off => {}
        _ if hardware => {
            for gpu in adapters.iter_mut().filter(|gpu| !gpu.software) {
                gpu.in_use = true;
            }
        }
        GpuPolicy::AllowSoftware => {
            if let Some(best) = adapters.first_mut() {
                best.in_use = true;
            }
        }
        GpuPolicy::Hardware | GpuPolicy::Auto => {}
    }
    for gpu in adapters.iter().filter(|gpu| gpu.software && !gpu.in_use) {
        tracing::info!(
            "software GPU adapter {} not used: it would sample slower than the CPU pool (start the node with --software-gpu to use it)",
            gpu.adapter
        );
    }
    adapters
}

/// One GPU adapter of a node.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuInfo {
    /// Adapter name as the driver reports it.
    pub adapter: String,
    /// Graphics backend (`Vulkan`, ...).
    pub backend: String,
    /// Device memory in bytes, when known.
    pub memory_bytes: Option<u64>,
    /// A software implementation on the CPU (lavapipe, llvmpipe).
    pub software: bool,
    /// The node's GPU supervisor runs a worker on it.
    pub in_use: bool,
    /// Chains it runs now.
    pub chains: u32,
}

/// How this node sees a member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberState {
    /// This node.
    Local,
    /// Answering heartbeats.
    Up,
    /// Being connected (first contact or reconnect).
    Connecting,
    /// Not answering; reconnect attempts continue with backoff.
    Down,
    /// Up (or this node), but shutting down: it finishes its running work and takes
    /// nothing new.
    Draining,
}

impl fmt::Display for MemberState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MemberState::Local => "local",
            MemberState::Up => "up",
            MemberState::Connecting => "connecting",
            MemberState::Down => "down",
            MemberState::Draining => "draining",
        })
    }
}

/// One row of the member list.
#[derive(Debug, Clone, PartialEq)]
pub struct MemberStatus {
    /// Full name.
    pub name: NodeName,
    /// The address peers dial.
    pub address: SocketAddr,
    /// As this node sees it.
    pub state: MemberState,
    /// As last reported; `None` before its first heartbeat answer.
    pub resources: Option<NodeResources>,
}

/// A change in the cluster, published to membership's subscribers.
#[derive(Debug, Clone, PartialEq)]
pub enum MembershipEvent {
    /// A node answers heartbeats: it joined, or came back.
    NodeUp {
        /// The node.
        node: NodeInfo,
        /// It had been up before (a reconnect after being down).
        reconnected: bool,
    },
    /// A node that is up drains: it finishes its running work, takes nothing new, then
    /// leaves. Place nothing there.
    NodeDraining {
        /// The node.
        node: NodeName,
    },
    /// A node that was up is not any more. Its jobs must be re-run elsewhere.
    NodeDown {
        /// The node.
        node: NodeName,
        /// Why.
        reason: DownReason,
    },
}

/// Why a node went down.
#[derive(Debug, Clone, PartialEq)]
pub enum DownReason {
    /// It announced that it was shutting down.
    Left,
    /// Its session closed (process died, network reset).
    ConnectionLost,
    /// It stopped answering heartbeats (stalled, partitioned, overloaded).
    HeartbeatTimeout {
        /// Heartbeats missed in a row.
        missed: u32,
        /// Over how long.
        after: Duration,
    },
}

impl fmt::Display for DownReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DownReason::Left => f.write_str("left the cluster"),
            DownReason::ConnectionLost => f.write_str("connection lost"),
            DownReason::HeartbeatTimeout { missed, after } => {
                write!(f, "no heartbeat answer for {after:?} ({missed} missed)")
            }
        }
    }
}

fn malformed(what: &str, error: impl fmt::Display) -> WireError {
    WireError::Malformed {
        reason: format!("{what}: {error}"),
    }
}

pub(crate) fn parse_address(text: &str) -> Result<SocketAddr, WireError> {
    text.parse().map_err(|error| malformed("address", error))
}

impl NodeInfo {
    pub(crate) fn to_wire(&self) -> WireNodeInfo {
        WireNodeInfo {
            name: self.name.to_string(),
            address: self.address.to_string(),
            resources: self.resources.to_wire(),
            draining: self.draining,
        }
    }

    pub(crate) fn from_wire(wire: WireNodeInfo) -> Result<Self, WireError> {
        Ok(Self {
            name: wire.name.parse().map_err(|e| malformed("node name", e))?,
            address: parse_address(&wire.address)?,
            resources: NodeResources::from_wire(wire.resources),
            draining: wire.draining,
        })
    }
}

impl NodeResources {
    pub(crate) fn to_wire(&self) -> WireResources {
        WireResources {
            cpu_slots: self.cpu_slots,
            gpus: self
                .gpus
                .iter()
                .map(|gpu| WireGpu {
                    adapter: gpu.adapter.clone(),
                    backend: gpu.backend.clone(),
                    memory_bytes: gpu.memory_bytes,
                    software: gpu.software,
                    unused: !gpu.in_use,
                    chains: gpu.chains,
                })
                .collect(),
            running_jobs: self.running_jobs,
        }
    }

    pub(crate) fn from_wire(wire: WireResources) -> Self {
        Self {
            cpu_slots: wire.cpu_slots,
            gpus: wire
                .gpus
                .into_iter()
                .map(|gpu| GpuInfo {
                    adapter: gpu.adapter,
                    backend: gpu.backend,
                    memory_bytes: gpu.memory_bytes,
                    software: gpu.software,
                    in_use: !gpu.unused,
                    chains: gpu.chains,
                })
                .collect(),
            running_jobs: wire.running_jobs,
        }
    }
}

impl MemberStatus {
    pub(crate) fn to_wire(&self) -> WireMemberStatus {
        WireMemberStatus {
            name: self.name.to_string(),
            address: self.address.to_string(),
            state: match self.state {
                MemberState::Local => WireMemberState::Local,
                MemberState::Up => WireMemberState::Up,
                MemberState::Connecting => WireMemberState::Connecting,
                MemberState::Down => WireMemberState::Down,
                MemberState::Draining => WireMemberState::Draining,
            },
            resources: self.resources.as_ref().map(NodeResources::to_wire),
        }
    }

    /// Decodes a member status as a peer sent it; public for the fuzz target.
    #[doc(hidden)]
    pub fn from_wire(wire: WireMemberStatus) -> Result<Self, WireError> {
        Ok(Self {
            name: wire.name.parse().map_err(|e| malformed("node name", e))?,
            address: parse_address(&wire.address)?,
            state: match wire.state {
                WireMemberState::Local => MemberState::Local,
                WireMemberState::Up => MemberState::Up,
                WireMemberState::Connecting => MemberState::Connecting,
                WireMemberState::Down => MemberState::Down,
                WireMemberState::Draining => MemberState::Draining,
            },
            resources: wire.resources.map(NodeResources::from_wire),
        })
    }
}

/// A gossiped member: a name and where to dial it.
pub(crate) fn member_from_wire(wire: &WireMember) -> Result<(NodeName, SocketAddr), WireError> {
    Ok((
        wire.name.parse().map_err(|e| malformed("node name", e))?,
        parse_address(&wire.address)?,
    ))
}

pub(crate) fn member_to_wire(name: &NodeName, address: SocketAddr) -> WireMember {
    WireMember {
        name: name.to_string(),
        address: address.to_string(),
    }
}

impl ConnectError {
    pub(crate) fn to_wire(&self) -> WireJoinError {
        match self {
            ConnectError::AuthenticationFailed { address } => WireJoinError::AuthenticationFailed {
                address: address.to_string(),
            },
            ConnectError::Unreachable { address, reason } => WireJoinError::Unreachable {
                address: address.to_string(),
                reason: reason.clone(),
            },
            ConnectError::Timeout { address, waited } => WireJoinError::Timeout {
                address: address.to_string(),
                waited_ms: u64::try_from(waited.as_millis()).unwrap_or(u64::MAX),
            },
            ConnectError::NotAClusterNode { address } => WireJoinError::Unreachable {
                address: address.to_string(),
                reason: "not a cluster node".to_owned(),
            },
            ConnectError::NameInUse {
                address,
                name,
                holder,
            } => WireJoinError::NameInUse {
                address: address.to_string(),
                name: name.to_string(),
                holder: holder.clone(),
            },
            ConnectError::Busy {
                address,
                per_address,
                limit,
            } => WireJoinError::Busy {
                address: address.to_string(),
                per_address: *per_address,
                limit: *limit,
            },
            ConnectError::Throttled {
                address,
                retry_after,
                failures,
            } => WireJoinError::Throttled {
                address: address.to_string(),
                retry_after_ms: u64::try_from(retry_after.as_millis()).unwrap_or(u64::MAX),
                failures: *failures,
            },
            ConnectError::TlsRequired { address } => WireJoinError::TlsRequired {
                address: address.to_string(),
            },
            ConnectError::TlsUnsupported { address } => WireJoinError::TlsUnsupported {
                address: address.to_string(),
            },
            ConnectError::Tls { address, problem } => WireJoinError::Tls {
                address: address.to_string(),
                problem: tls_problem_to_wire(problem),
            },
            ConnectError::VersionMismatch { address, theirs } => WireJoinError::VersionMismatch {
                address: address.to_string(),
                theirs: *theirs,
            },
        }
    }

    /// The error a remote node reported for its join. An address it could not parse becomes
    /// `Unreachable` at `fallback`.
    pub(crate) fn from_wire(wire: WireJoinError, fallback: SocketAddr) -> Self {
        let address_of = |text: &str| text.parse().unwrap_or(fallback);
        match wire {
            WireJoinError::AuthenticationFailed { address } => ConnectError::AuthenticationFailed {
                address: address_of(&address),
            },
            WireJoinError::Unreachable { address, reason } => ConnectError::Unreachable {
                address: address_of(&address),
                reason,
            },
            WireJoinError::Timeout { address, waited_ms } => ConnectError::Timeout {
                address: address_of(&address),
                waited: Duration::from_millis(waited_ms),
            },
            WireJoinError::BadAddress { address } => ConnectError::Unreachable {
                address: fallback,
                reason: format!("{address:?} is not host:port"),
            },
            WireJoinError::NameInUse {
                address,
                name,
                holder,
            } => match name.parse() {
                Ok(name) => ConnectError::NameInUse {
                    address: address_of(&address),
                    name,
                    holder,
                },
                Err(_) => ConnectError::Unreachable {
                    address: address_of(&address),
                    reason: format!("the name {name:?} is in use"),
                },
            },
            WireJoinError::Busy {
                address,
                per_address,
                limit,
            } => ConnectError::Busy {
                address: address_of(&address),
                per_address,
                limit,
            },
            WireJoinError::Throttled {
                address,
                retry_after_ms,
                failures,
            } => ConnectError::Throttled {
                address: address_of(&address),
                retry_after: Duration::from_millis(retry_after_ms),
                failures,
            },
            WireJoinError::TlsRequired { address } => ConnectError::TlsRequired {
                address: address_of(&address),
            },
            WireJoinError::TlsUnsupported { address } => ConnectError::TlsUnsupported {
                address: address_of(&address),
            },
            WireJoinError::Tls { address, problem } => ConnectError::Tls {
                address: address_of(&address),
                problem: tls_problem_from_wire(problem),
            },
            WireJoinError::VersionMismatch { address, theirs } => ConnectError::VersionMismatch {
                address: address_of(&address),
                theirs,
            },
        }
    }
}

fn tls_problem_to_wire(problem: &TlsProblem) -> WireTlsProblem {
    match problem {
        TlsProblem::NodeCertificateExpired => WireTlsProblem::NodeCertificateExpired,
        TlsProblem::NodeCertificateUnknownIssuer => WireTlsProblem::NodeCertificateUnknownIssuer,
        TlsProblem::NodeCertificateWrongName => WireTlsProblem::NodeCertificateWrongName,
        TlsProblem::OurCertificateExpired => WireTlsProblem::OurCertificateExpired,
        TlsProblem::OurCertificateUnknownIssuer => WireTlsProblem::OurCertificateUnknownIssuer,
        TlsProblem::OurCertificateRefused { alert } => WireTlsProblem::OurCertificateRefused {
            alert: alert.clone(),
        },
        TlsProblem::Other { reason } => WireTlsProblem::Other {
            reason: reason.clone(),
        },
    }
}

fn tls_problem_from_wire(problem: WireTlsProblem) -> TlsProblem {
    match problem {
        WireTlsProblem::NodeCertificateExpired => TlsProblem::NodeCertificateExpired,
        WireTlsProblem::NodeCertificateUnknownIssuer => TlsProblem::NodeCertificateUnknownIssuer,
        WireTlsProblem::NodeCertificateWrongName => TlsProblem::NodeCertificateWrongName,
        WireTlsProblem::OurCertificateExpired => TlsProblem::OurCertificateExpired,
        WireTlsProblem::OurCertificateUnknownIssuer => TlsProblem::OurCertificateUnknownIssuer,
        WireTlsProblem::OurCertificateRefused { alert } => {
            TlsProblem::OurCertificateRefused { alert }
        }
        WireTlsProblem::Other { reason } => TlsProblem::Other { reason },
    }
}

#[cfg(test)]
mod tests {
    use super::{GpuInfo, GpuPolicy, choose_gpu};

    fn adapter(name: &str, software: bool) -> GpuInfo {
        GpuInfo {
            adapter: name.to_owned(),
            backend: "Vulkan".to_owned(),
            memory_bytes: None,
            software,
            in_use: false,
            chains: 0,
        }
    }

    fn chosen(policy: GpuPolicy, cpu_slots: u32, adapters: &[GpuInfo]) -> Option<String> {
        let used: Vec<String> = choose_gpu(adapters.to_vec(), policy.resolve(cpu_slots))
            .into_iter()
            .filter(|gpu| gpu.in_use)
            .map(|gpu| gpu.adapter)
            .collect();
        (!used.is_empty()).then(|| used.join(","))
    }

    #[test]
    fn a_software_adapter_is_used_only_without_cpu_slots_unless_told() {
        let software = [adapter("llvmpipe", true)];
        assert_eq!(chosen(GpuPolicy::Auto, 4, &software), None);
        assert_eq!(
            chosen(GpuPolicy::Auto, 0, &software).as_deref(),
            Some("llvmpipe")
        );
        assert_eq!(chosen(GpuPolicy::Hardware, 0, &software), None);
        assert_eq!(
            chosen(GpuPolicy::AllowSoftware, 4, &software).as_deref(),
            Some("llvmpipe")
        );
        assert_eq!(chosen(GpuPolicy::Off, 0, &software), None);
        // A hardware adapter is chosen before a software one, whatever the policy allows.
        let both = [adapter("H200", false), adapter("llvmpipe", true)];
        for policy in [
            GpuPolicy::Auto,
            GpuPolicy::Hardware,
            GpuPolicy::AllowSoftware,
        ] {
            assert_eq!(chosen(policy, 0, &both).as_deref(), Some("H200"));
        }
        // Every hardware adapter is used: the GPU supervisor runs a worker on each.
        let several = [
            adapter("H200", false),
            adapter("H200", false),
            adapter("llvmpipe", true),
        ];
        assert_eq!(
            chosen(GpuPolicy::Auto, 4, &several).as_deref(),
            Some("H200,H200")
        );
        let two_software = [adapter("llvmpipe", true), adapter("lavapipe", true)];
        assert_eq!(
            chosen(GpuPolicy::AllowSoftware, 4, &two_software).as_deref(),
            Some("llvmpipe")
        );
    }
}
