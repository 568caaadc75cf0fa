#include "strata/core/presets.h"

namespace strata {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

struct NamedGpu {
  const char* name;
  double memory_bytes;    // as CUDA reports it (cudaMemGetInfo total)
  double reserved_bytes;  // the CUDA context with the framework's kernels
  double peak_flops;      // dense fp16/bf16 tensor-core FLOP/s (datasheet)
  double hbm;             // bytes/s (datasheet)
  double efficiency;      // large-GEMM fraction of peak (docs/simulator.md: source or assumption)
  int sms;                // whitepaper
  int tile_m, tile_n;     // cuBLAS's usual output tile on that architecture
  double launch_latency;  // seconds per kernel
};

constexpr double kMiB = 1024.0 * 1024.0;

// docs/simulator.md "Presets" gives the source of each number. Memory: the
// total CUDA reports for the device (cudaMemGetInfo, PyTorch's
// total_memory), not the datasheet's size; nvidia-smi's is the same on a
// V100 and larger on Ampere and Hopper. Reserved: the CUDA context of a
// PyTorch process, which loaded every kernel of the framework before CUDA
// 11.7 (the V100's era) and loads them lazily since.
constexpr NamedGpu kGpus[] = {
    {"v100-32gb", 32510 * kMiB, 1000 * kMiB, 125e12, 900e9, 83.0 / 125.0, 80, 128, 128, 5e-6},
    {"a100-40gb", 40536 * kMiB, 300 * kMiB, 312e12, 1555e9, 0.80, 108, 256, 128, 4e-6},
    {"a100-80gb", 79.35 * kGiB, 300 * kMiB, 312e12, 2039e9, 0.80, 108, 256, 128, 4e-6},
    {"h100-80gb", 81090 * kMiB, 300 * kMiB, 989e12, 3350e9, 0.75, 132, 256, 128, 4e-6},
    {"h200", 143156 * kMiB, 300 * kMiB, 989e12, 4800e9, 0.70, 132, 256, 128, 4e-6},
};

struct NamedDrive {
  const char* name;
  double capacity;     // bytes (decimal TB, as sold)
  double read, write;  // sequential bytes/s, as the vendor quotes them
  double dwpd;         // rated drive writes per day over the warranty (0: rated by tbw)
  double tbw;          // rated bytes written (0: rated by dwpd)
  double years;        // warranty
};

// docs/endurance.md "Drive presets" gives each figure's source.
constexpr NamedDrive kDrives[] = {
    {"samsung-pm1733-7.68tb", 7.68e12, 6.4e9, 3.8e9, 1, 0, 5},
    {"samsung-pm1735-6.4tb", 6.4e12, 6.4e9, 3.8e9, 3, 0, 5},
    {"micron-7450-pro-7.68tb", 7.68e12, 6.8e9, 5.6e9, 1, 0, 5},
    {"micron-7450-max-6.4tb", 6.4e12, 6.8e9, 5.6e9, 3, 0, 5},
    {"kioxia-cm6-r-7.68tb", 7.68e12, 6.9e9, 4.2e9, 1, 0, 5},
    {"kioxia-cm6-v-6.4tb", 6.4e12, 6.9e9, 4.2e9, 3, 0, 5},
    {"samsung-980-pro-2tb", 2e12, 7.0e9, 5.1e9, 0, 1200e12, 5},
};

}  // namespace

std::optional<Bytes> NvmePreset(std::string_view name, NvmeSpec* out) {
  for (const NamedDrive& d : kDrives) {
    if (name != d.name) continue;
    out->read_bandwidth = Bandwidth{d.read};
    out->write_bandwidth = Bandwidth{d.write};
    out->rated_dwpd = d.dwpd;
    out->rated_tbw = Bytes(static_cast<int64_t>(d.tbw));
    out->warranty_years = d.years;
    return Bytes(static_cast<int64_t>(d.capacity));
  }
  return std::nullopt;
}

std::vector<std::string> NvmePresetNames() {
  std::vector<std::string> names;
  for (const NamedDrive& d : kDrives) names.emplace_back(d.name);
  return names;
}

bool GpuPreset(std::string_view name, GpuSpec* out) {
  for (const NamedGpu& g : kGpus) {
    if (name != g.name) continue;
    out->memory = Bytes(static_cast<int64_t>(g.memory_bytes));
    out->reserved_memory = Bytes(static_cast<int64_t>(g.reserved_bytes));
    out->peak_flops = FlopRate{g.peak_flops};
    out->hbm_bandwidth = Bandwidth{g.hbm};
    out->efficiency = g.efficiency;
    out->compute_model = ComputeModel::kRoofline;
    out->sms = g.sms;
    out->tile_m = g.tile_m;
    out->tile_n = g.tile_n;
    out->launch_latency = Seconds{g.launch_latency};
    return true;
  }
  return false;
}

std::vector<std::string> GpuPresetNames() {
  std::vector<std::string> names;
  for (const NamedGpu& g : kGpus) names.emplace_back(g.name);
  return names;
}

bool HardwarePreset(std::string_view name, HardwareSpec* out) {
  if (name != "dgx2") return false;
  // NVIDIA DGX-2 as the ZeRO-Infinity paper used it (SC'21, Sec. 8): 16
  // V100-32GB on NVSwitch, two Xeon Platinum 8168 (2 x 24 cores), 1.5 TB of
  // DDR4, eight 100 Gb/s InfiniBand NICs, 8 NVMe drives in RAID-0 (about
  // 25 GB/s read per node, paper Fig. 2b); PCIe 12 GB/s to one GPU alone,
  // about 3 GB/s each with all 16 copying (paper Fig. 2b).
  HardwareSpec h;
  h.nodes = 1;
  h.gpus_per_node = 16;
  GpuPreset("v100-32gb", &h.gpu);
  h.cpu.memory = Bytes(static_cast<int64_t>(1.5 * 1024 * kGiB));
  h.cpu.memory_bandwidth = Bandwidth{256e9};  // 2 sockets x 6 channels x DDR4-2666
  h.cpu.cores = 48;
  // One core's in-cache CPU Adam, measured by `strata calibrate` on an AVX-512
  // AMD EPYC here (2.2e9 parameters/s), not on a Xeon 8168: memory binds on
  // the DGX-2 either way (48 cores x 2.2e9 against 256 GB/s / 30 B).
  h.cpu.adam_core_rate = 2.2e9;
  // A fresh 4 KiB page's first touch: assumed, not measured on a DGX-2
  // (about 1 us on bare metal: docs/simulator.md "First touch").
  h.cpu.page_fault_time = Seconds{1e-6};
  h.pcie.bandwidth = Bandwidth{12e9};
  h.pcie.gpus_per_switch = 2;
  h.pcie.switch_bandwidth = Bandwidth{12e9};
  h.pcie.host_bandwidth = Bandwidth{48e9};
  h.nvlink.bandwidth = Bandwidth{150e9};  // NVSwitch: 6 NVLink2 x 25 GB/s per direction
  h.network.bandwidth = Bandwidth{12.5e9};
  h.network.nics = 8;
  h.nvme.capacity = Bytes(static_cast<int64_t>(30.72e12));  // 8 x 3.84 TB
  h.nvme.drives = 8;
  h.nvme.read_bandwidth = Bandwidth{3.125e9};
  h.nvme.write_bandwidth = Bandwidth{2.5e9};
  *out = h;
  return true;
}

std::vector<std::string> HardwarePresetNames() { return {"dgx2"}; }

}  // namespace strata
