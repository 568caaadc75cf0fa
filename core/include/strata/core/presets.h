// Named hardware descriptions (issue #15): GPUs (`hardware.gpu.model`) and
// whole machines (`hardware.preset`). A preset fills the fields; keys
// written beside it override them. Every value is cited in
// docs/simulator.md ("Presets"), or marked there as an assumption.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "strata/core/scenario.h"

namespace strata {

// Fills *out (memory, peak_flops, hbm_bandwidth, efficiency, sms,
// tile, launch_latency; compute_model roofline) and returns true, or false
// for an unknown name (out untouched).
bool GpuPreset(std::string_view name, GpuSpec* out);
std::vector<std::string> GpuPresetNames();

// An NVMe drive by model (`hardware.nvme.model`): fills *out's per-drive
// read and write bandwidth, rated_dwpd or rated_tbw and warranty_years, and
// returns one drive's capacity; nullopt for an unknown name (out
// untouched). Sources: docs/endurance.md, "Drive presets".
std::optional<Bytes> NvmePreset(std::string_view name, NvmeSpec* out);
std::vector<std::string> NvmePresetNames();

// Fills every field of *out for a machine (one node; `nodes` stays 1) and
// returns true, or false for an unknown name.
bool HardwarePreset(std::string_view name, HardwareSpec* out);
std::vector<std::string> HardwarePresetNames();

}  // namespace strata
