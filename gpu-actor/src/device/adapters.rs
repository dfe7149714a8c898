//! Adapter enumeration and what we report about each adapter: name, backend, type, driver,
//! the features and limits that matter for our kernels, and device memory.
//!
//! wgpu has no API for device memory. On Vulkan it is read from the physical device's memory
//! heaps through `Adapter::as_hal`, which is `unsafe`; this module alone allows `unsafe_code`,
//! for that one read-only query (see [`device_local_memory`]).
#![allow(unsafe_code)]

use std::fmt;

use crate::error::GpuError;

/// What kind of device an adapter is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeviceKind {
    /// A discrete GPU with its own memory.
    Discrete,
    /// A GPU sharing memory with the CPU.
    Integrated,
    /// A virtual or hosted GPU.
    Virtual,
    /// A software implementation running on the CPU (lavapipe): correct, slow.
    Software,
    /// Anything else.
    Other,
}

impl DeviceKind {
    fn from_wgpu(device_type: wgpu::DeviceType) -> DeviceKind {
        match device_type {
            wgpu::DeviceType::DiscreteGpu => DeviceKind::Discrete,
            wgpu::DeviceType::IntegratedGpu => DeviceKind::Integrated,
            wgpu::DeviceType::VirtualGpu => DeviceKind::Virtual,
            wgpu::DeviceType::Cpu => DeviceKind::Software,
            wgpu::DeviceType::Other => DeviceKind::Other,
        }
    }

    /// Preference order, best first: wgpu's `PowerPreference::HighPerformance` order.
    fn rank(self) -> u8 {
        match self {
            DeviceKind::Discrete => 0,
            DeviceKind::Integrated => 1,
            DeviceKind::Other => 2,
            DeviceKind::Virtual => 3,
            DeviceKind::Software => 4,
        }
    }
}

impl fmt::Display for DeviceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DeviceKind::Discrete => "discrete GPU",
            DeviceKind::Integrated => "integrated GPU",
            DeviceKind::Virtual => "virtual GPU",
            DeviceKind::Software => "software (CPU)",
            DeviceKind::Other => "other",
        })
    }
}

/// The optional features that matter for our kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct AdapterFeatures {
    /// f64 in shaders: needed for [`crate::Precision::F64`].
    pub shader_f64: bool,
    /// i64/u64 in shaders.
    pub shader_int64: bool,
    /// f16 in shaders.
    pub shader_f16: bool,
    /// Subgroup (warp) operations.
    pub subgroup: bool,
    /// GPU timestamps, for kernel timings.
    pub timestamp_query: bool,
    /// `atomic<f32>`.
    pub float32_atomic: bool,
    /// Driver pipeline caches that can be saved.
    pub pipeline_cache: bool,
    /// Mappable buffers that kernels may also bind as storage: sampling dispatches write
    /// their draws straight into the read-back buffer ([`crate::DrawsOutput::Mapped`]).
    pub mappable_primary_buffers: bool,
}

impl AdapterFeatures {
    fn from_wgpu(features: wgpu::Features) -> AdapterFeatures {
        AdapterFeatures {
            shader_f64: features.contains(wgpu::Features::SHADER_F64),
            shader_int64: features.contains(wgpu::Features::SHADER_INT64),
            shader_f16: features.contains(wgpu::Features::SHADER_F16),
            subgroup: features.contains(wgpu::Features::SUBGROUP),
            timestamp_query: features.contains(wgpu::Features::TIMESTAMP_QUERY),
            float32_atomic: features.contains(wgpu::Features::SHADER_FLOAT32_ATOMIC),
            pipeline_cache: features.contains(wgpu::Features::PIPELINE_CACHE),
            mappable_primary_buffers: features.contains(wgpu::Features::MAPPABLE_PRIMARY_BUFFERS),
        }
    }

    /// The names of the features present, in wgpu's spelling.
    pub fn names(&self) -> Vec<&'static str> {
        [
            (self.shader_f64, "SHADER_F64"),
            (self.shader_int64, "SHADER_INT64"),
            (self.shader_f16, "SHADER_F16"),
            (self.subgroup, "SUBGROUP"),
            (self.timestamp_query, "TIMESTAMP_QUERY"),
            (self.float32_atomic, "SHADER_FLOAT32_ATOMIC"),
            (self.pipeline_cache, "PIPELINE_CACHE"),
            (self.mappable_primary_buffers, "MAPPABLE_PRIMARY_BUFFERS"),
        ]
        .into_iter()
        .filter_map(|(present, name)| present.then_some(name))
        .collect()
    }
}

/// The limits that bound our kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct AdapterLimits {
    /// Largest buffer, bytes.
    pub max_buffer_size: u64,
    /// Largest storage-buffer binding, bytes: bounds model data and per-batch buffers.
    pub max_storage_buffer_binding_size: u64,
    /// Storage buffers one shader stage may bind.
    pub max_storage_buffers_per_shader_stage: u32,
    /// Workgroup (shared) memory, bytes.
    pub max_compute_workgroup_storage_size: u32,
    /// Invocations per workgroup.
    pub max_compute_invocations_per_workgroup: u32,
    /// Workgroups per dispatch dimension.
    pub max_compute_workgroups_per_dimension: u32,
}

impl AdapterLimits {
    fn from_wgpu(limits: &wgpu::Limits) -> AdapterLimits {
        AdapterLimits {
            max_buffer_size: limits.max_buffer_size,
            max_storage_buffer_binding_size: limits.max_storage_buffer_binding_size,
            max_storage_buffers_per_shader_stage: limits.max_storage_buffers_per_shader_stage,
            max_compute_workgroup_storage_size: limits.max_compute_workgroup_storage_size,
            max_compute_invocations_per_workgroup: limits.max_compute_invocations_per_workgroup,
            max_compute_workgroups_per_dimension: limits.max_compute_workgroups_per_dimension,
        }
    }
}

/// Device memory, as far as it can be known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceMemory {
    /// The total of the device-local memory heaps, bytes. For a software device that is
    /// host memory.
    Known {
        /// Bytes.
        device_local_bytes: u64,
    },
    /// Not obtainable (not a Vulkan adapter, or no device-local heap reported).
    Unknown,
}

/// One adapter as `cluster-cli devices` shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct AdapterReport {
    /// Position in [`enumerate_adapters`]'s list (best first).
    pub index: usize,
    /// The adapter's name (`NVIDIA H100 80GB HBM3`, `llvmpipe (LLVM 15.0.6, 256 bits)`).
    pub name: String,
    /// The graphics API, always `vulkan` in this build.
    pub backend: String,
    /// What kind of device it is.
    pub kind: DeviceKind,
    /// Driver name.
    pub driver: String,
    /// Driver version and details.
    pub driver_info: String,
    /// PCI vendor id.
    pub vendor: u32,
    /// PCI device id.
    pub device_id: u32,
    /// Smallest and largest subgroup (warp) size.
    pub subgroup_sizes: (u32, u32),
    /// Optional features.
    pub features: AdapterFeatures,
    /// Limits.
    pub limits: AdapterLimits,
    /// Device memory.
    pub memory: DeviceMemory,
}

impl AdapterReport {
    pub(crate) fn new(index: usize, adapter: &wgpu::Adapter) -> AdapterReport {
        let info = adapter.get_info();
        AdapterReport {
            index,
            name: info.name,
            backend: info.backend.to_str().to_owned(),
            kind: DeviceKind::from_wgpu(info.device_type),
            driver: info.driver,
            driver_info: info.driver_info,
            vendor: info.vendor,
            device_id: info.device,
            subgroup_sizes: (info.subgroup_min_size, info.subgroup_max_size),
            features: AdapterFeatures::from_wgpu(adapter.features()),
            limits: AdapterLimits::from_wgpu(&adapter.limits()),
            memory: device_local_memory(adapter),
        }
    }

    /// Whether this is a software device such as lavapipe: usable, but never for timings.
    pub fn is_software(&self) -> bool {
        self.kind == DeviceKind::Software
    }

    /// The loop iterations one invocation may take before the driver stops its loops
    /// (`wgsl::SOFTWARE_LOOP_LIMIT` on lavapipe, the software device we know), or `None`.
    pub fn loop_limit(&self) -> Option<u64> {
        self.is_software()
            .then_some(crate::wgsl::SOFTWARE_LOOP_LIMIT)
    }
}

/// Bytes in GiB, or MiB below 1 GiB.
fn human_bytes(bytes: u64) -> String {
    const MIB: f64 = (1u64 << 20) as f64;
    let mib = bytes as f64 / MIB;
    if mib >= 1024.0 {
        format!("{:.1} GiB", mib / 1024.0)
    } else {
        format!("{mib:.0} MiB")
    }
}

impl fmt::Display for DeviceMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceMemory::Known { device_local_bytes } => {
                f.write_str(&human_bytes(*device_local_bytes))
            }
            DeviceMemory::Unknown => f.write_str("unknown"),
        }
    }
}

impl fmt::Display for AdapterReport {
    /// A block of lines: name, then indented details.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "[{}] {}", self.index, self.name)?;
        writeln!(f, "    backend:  {}", self.backend)?;
        writeln!(f, "    type:     {}", self.kind)?;
        writeln!(f, "    driver:   {} {}", self.driver, self.driver_info)?;
        let memory_note = if self.is_software() && self.memory != DeviceMemory::Unknown {
            " (host memory)"
        } else {
            ""
        };
        writeln!(f, "    memory:   {}{memory_note}", self.memory)?;
        let features = self.features.names();
        writeln!(
            f,
            "    features: {}",
            if features.is_empty() {
                "none of interest".to_owned()
            } else {
                features.join(" ")
            }
        )?;
        writeln!(
            f,
            "    limits:   buffer {}, storage binding {}, workgroup memory {} KiB, {} invocations per workgroup",
            human_bytes(self.limits.max_buffer_size),
            human_bytes(self.limits.max_storage_buffer_binding_size),
            self.limits.max_compute_workgroup_storage_size / 1024,
            self.limits.max_compute_invocations_per_workgroup
        )?;
        write!(
            f,
            "    subgroup: {}..{}",
            self.subgroup_sizes.0, self.subgroup_sizes.1
        )
    }
}

/// A wgpu instance for Vulkan only. Environment variables are not read: only `cluster-cli`
/// reads the environment.
pub(crate) fn vulkan_instance() -> wgpu::Instance {
    let mut descriptor = wgpu::InstanceDescriptor::new_without_display_handle();
    descriptor.backends = wgpu::Backends::VULKAN;
    wgpu::Instance::new(descriptor)
}

/// The instance's Vulkan adapters, best first (discrete, integrated, other, virtual,
/// software; the enumeration order among equals).
pub(crate) fn sorted_adapters(instance: &wgpu::Instance) -> Vec<wgpu::Adapter> {
    let mut adapters = pollster::block_on(instance.enumerate_adapters(wgpu::Backends::VULKAN));
    adapters.sort_by_key(|adapter| DeviceKind::from_wgpu(adapter.get_info().device_type).rank());
    adapters
}

/// Every Vulkan adapter of this machine, best first. Creates no device, so it may run beside
/// an open [`crate::GpuDevice`].
///
/// # Errors
///
/// [`GpuError::NoAdapter`] when there is none (no driver, or no Vulkan loader).
pub fn enumerate_adapters() -> Result<Vec<AdapterReport>, GpuError> {
    let instance = vulkan_instance();
    let reports: Vec<AdapterReport> = sorted_adapters(&instance)
        .iter()
        .enumerate()
        .map(|(index, adapter)| AdapterReport::new(index, adapter))
        .collect();
    if reports.is_empty() {
        return Err(GpuError::NoAdapter);
    }
    Ok(reports)
}

/// The sum of the device-local Vulkan memory heaps.
fn device_local_memory(adapter: &wgpu::Adapter) -> DeviceMemory {
    const DEVICE_LOCAL: u32 = 0x1; // VK_MEMORY_HEAP_DEVICE_LOCAL_BIT
    // SAFETY: `as_hal` requires that the returned adapter is not destroyed while in use; we only
    // read properties through it and drop the guard before returning. The Vulkan call is a
    // query on a valid physical device of the instance that owns it, which is alive as long
    // as `adapter` is.
    let properties = unsafe {
        let Some(hal) = adapter.as_hal::<wgpu::hal::api::Vulkan>() else {
            return DeviceMemory::Unknown;
        };
        hal.shared_instance()
            .raw_instance()
            .get_physical_device_memory_properties(hal.raw_physical_device())
    };
    let heaps = properties.memory_heaps_as_slice();
    let device_local_bytes: u64 = heaps
        .iter()
        .filter(|heap| heap.flags.as_raw() & DEVICE_LOCAL != 0)
        .map(|heap| heap.size)
        .sum();
    if device_local_bytes == 0 {
        DeviceMemory::Unknown
    } else {
        DeviceMemory::Known { device_local_bytes }
    }
}
