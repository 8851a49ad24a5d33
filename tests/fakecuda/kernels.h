// Modules and the built-in kernels.
//
// cuModuleLoadData accepts two kinds of image, both NUL-terminated text. One starts with
// "fakecuda-module" (kModuleImagePrefix): every such module holds the same built-in kernels,
// whose parameters come through kernelParams (an array of pointers to each argument):
//   fakecuda_spin(uint64_t duration_ns)
//       occupies the device's compute engine for duration_ns;
//   fakecuda_fill_u32(CUdeviceptr dst, uint32_t value, uint64_t count, uint64_t duration_ns)
//       dst[i] = value for i < count;
//   fakecuda_add_u32(CUdeviceptr dst, CUdeviceptr src, uint64_t count, uint64_t duration_ns)
//       dst[i] += src[i] for i < count;
//   fakecuda_append_u32(CUdeviceptr log, uint32_t value, uint64_t duration_ns)
//       log[0] is a count: log[1 + log[0]] = value, then log[0]++ (appends of one process are
//       atomic with respect to each other);
//   fakecuda_sm_probe(CUdeviceptr out, uint64_t duration_ns)
//       out[block] = the SM id the block ran on, for every block of the grid (block = bx + by*gx
//       + bz*gx*gy), blocks dealt round-robin over the SMs the launch may use (tpcs.h) in
//       ascending order.
// The other is PTX: text containing ".version" and ".entry". Its functions are its entries
// (".entry name("); one whose body (up to the next .entry) reads %smid runs as
// fakecuda_sm_probe, with the same parameters (the shim's probe kernel); any other entry is
// CUDA_ERROR_NOT_SUPPORTED.
// A kernel's memory must be memory the fake handed out (device memory or pinned host memory,
// readable, and writable where written): checked at launch, so a bad pointer is
// CUDA_ERROR_INVALID_VALUE instead of a crash. An append that would write past the log's
// allocation writes nothing and says so on stderr. A kernel launched with every TPC disabled
// runs no block: it has no effect, says so on stderr and still completes.
//
// A CUmodule is the address of a Module, a CUfunction the address of one of its kernels. Modules
// are never freed (they are small), so a handle of an unloaded module stays recognisable and
// gets CUDA_ERROR_INVALID_HANDLE. Modules are unloaded with their context. Thread-safe.

#ifndef MISSILE_TESTS_FAKECUDA_KERNELS_H_
#define MISSILE_TESTS_FAKECUDA_KERNELS_H_

#include <cuda.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "thread_annotations.h"
#include "tpcs.h"

namespace fakecuda {

class AddressSpace;
class ComputeEngine;
struct Context;

inline constexpr char kModuleImagePrefix[] = "fakecuda-module";

enum class KernelKind : int { kSpin, kFillU32, kAddU32, kAppendU32, kSmProbe };
inline constexpr int kNumKernels = 5;

// One launch of a built-in kernel, its arguments read and checked.
struct KernelCall {
  uint64_t duration_ns = 0;
  std::function<void()> effect;  // empty for fakecuda_spin and fakecuda_sm_probe
  // fakecuda_sm_probe: where each block's SM id goes (0 for the other kernels), and how many.
  CUdeviceptr sm_out = 0;
  uint64_t blocks = 0;
};

// Reads the arguments of a `kind` kernel launched on `grid` from `params` and checks its memory.
CUresult PrepareKernel(KernelKind kind, const unsigned grid[3], void** params,
                       const AddressSpace& memory, KernelCall* out);

// Runs `call` on `device`'s engine with the TPCs `disabled` masked off: the probe's SM ids, or
// the kernel's effect; with no SM left, no effect (said on stderr).
void RunKernel(ComputeEngine& engine, const TpcLayout& tpcs, int device, const KernelCall& call,
               const TpcMask& disabled);

// One launch of `f` on `device` (launch_api.cc): the launch's checks (function, dimensions,
// `extra`, arguments and memory) done now, its arguments copied.
CUresult KernelOp(CUfunction f, const unsigned grid[3], const unsigned block[3], void** params,
                  void** extra, int device, KernelTask* out);

class ModuleManager {
 public:
  ModuleManager() = default;
  ModuleManager(const ModuleManager&) = delete;
  ModuleManager& operator=(const ModuleManager&) = delete;

  CUresult Load(Context* ctx, const void* image, CUmodule* out) FAKECUDA_LOCKS_EXCLUDED(mu_);
  CUresult Unload(CUmodule handle) FAKECUDA_LOCKS_EXCLUDED(mu_);
  CUresult GetFunction(CUmodule handle, const char* name, CUfunction* out)
      FAKECUDA_LOCKS_EXCLUDED(mu_);
  // The kernel a function handle names; CUDA_ERROR_INVALID_HANDLE when its module is gone.
  CUresult Lookup(CUfunction f, KernelKind* kind) const FAKECUDA_LOCKS_EXCLUDED(mu_);
  // Unloads the context's modules.
  void ReleaseContext(Context* ctx) FAKECUDA_LOCKS_EXCLUDED(mu_);

 private:
  struct Function {
    KernelKind kind = KernelKind::kSpin;
  };
  struct Module {
    Context* ctx = nullptr;
    std::array<Function, kNumKernels> functions;  // indexed by KernelKind
    std::string ptx;  // a PTX module's text (then `functions` is unused)
    std::unordered_map<std::string, std::unique_ptr<Function>> entries;  // PTX, as looked up
  };
  void UnloadLocked(Module* module) FAKECUDA_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  CUresult PtxFunction(Module* module, const char* name, CUfunction* out)
      FAKECUDA_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable Mutex mu_;
  std::vector<std::unique_ptr<Module>> all_ FAKECUDA_GUARDED_BY(mu_);
  std::unordered_set<Module*> live_ FAKECUDA_GUARDED_BY(mu_);
  std::unordered_map<CUfunction, KernelKind> functions_ FAKECUDA_GUARDED_BY(mu_);
};

}  // namespace fakecuda

#endif  // MISSILE_TESTS_FAKECUDA_KERNELS_H_
