// The fake's configuration, read from FAKECUDA_* environment variables (listed in
// include/fakecuda/fakecuda.h).
//
// Read once per process when the process-wide state is created (a forked child creates its own
// and so reads the environment again). A malformed variable does not abort: `error` says what is
// wrong and cuInit fails with CUDA_ERROR_INVALID_VALUE after printing it, so a test setup mistake
// is loud. Immutable after construction; safe to read from any thread.

#ifndef MISSILE_TESTS_FAKECUDA_CONFIG_H_
#define MISSILE_TESTS_FAKECUDA_CONFIG_H_

#include <cuda.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fakecuda {

inline constexpr int kMaxDevices = 8;
inline constexpr uint64_t kGranularity = 2ull << 20;  // VMM granularity and physical frame size

struct FailRule {
  std::string name;  // exported entry point name
  uint64_t nth = 0;  // 1-based call number in this process
  CUresult code = CUDA_ERROR_OUT_OF_MEMORY;
};

struct Config {
  int num_devices = 1;
  uint64_t total_mem = 16ull << 30;  // per device, a multiple of kGranularity
  double pcie_bytes_per_us = 4000;   // 0: no link model
  bool engine_sharing = true;        // FAKECUDA_ENGINE: kernels share each device's engine
  uint64_t timeslice_ns = 0;         // FAKECUDA_TIMESLICE_US: 0 = turns at kernel granularity
  std::string shm_name;              // "/name"
  bool phys_shuffle = false;
  uint64_t shuffle_seed = 0;
  std::vector<uint64_t> channel_masks;
  std::vector<FailRule> fail_rules;
  bool allow_with_gpu = false;
  // FAKECUDA_DEAD_TPCS: the floorswept TPCs of every device (tpcs.h).
  std::vector<int> dead_tpcs = {3, 12, 25, 38, 51, 64};
  bool mps = false;                    // FAKECUDA_MPS: CU_DEVICE_ATTRIBUTE_MPS_ENABLED reads 1
  bool launch_callback = true;         // FAKECUDA_LAUNCH_CALLBACK: the export table exists
  uint8_t launch_desc_version = 0x40;  // FAKECUDA_LAUNCH_DESC_VERSION (launch_callback.h)
  std::string error;  // empty when every variable parsed

  static Config FromEnvironment();
};

// "8G", "512M", "4096", "1.5G", "16GiB": binary multiples. False on malformed input.
bool ParseByteSize(std::string_view text, uint64_t* bytes);

// A CUresult from a decimal number or a CUDA_ERROR_* / CUDA_SUCCESS name.
bool ParseErrorCode(std::string_view text, CUresult* code);

}  // namespace fakecuda

#endif  // MISSILE_TESTS_FAKECUDA_CONFIG_H_
