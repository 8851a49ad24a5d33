// Helpers for tests of the fake's kernels: the built-in module and one-line launches.

#ifndef MISSILE_TESTS_FAKECUDA_KERNEL_UTIL_H_
#define MISSILE_TESTS_FAKECUDA_KERNEL_UTIL_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "test_util.h"

namespace fakecuda_test {

inline constexpr uint64_t kMs = 1'000'000;  // ns

// The built-in kernels of a module loaded in the current context.
struct Kernels {
  CUmodule module = nullptr;
  CUfunction spin = nullptr;
  CUfunction fill = nullptr;
  CUfunction add = nullptr;
  CUfunction append = nullptr;
  CUfunction probe = nullptr;

  // CUDA_SUCCESS or the first failure.
  CUresult Load() {
    if (CUresult r = cuModuleLoadData(&module, "fakecuda-module"); r != CUDA_SUCCESS) return r;
    for (auto [out, name] :
         {std::pair{&spin, "fakecuda_spin"}, std::pair{&fill, "fakecuda_fill_u32"},
          std::pair{&add, "fakecuda_add_u32"}, std::pair{&append, "fakecuda_append_u32"},
          std::pair{&probe, "fakecuda_sm_probe"}}) {
      if (CUresult r = cuModuleGetFunction(out, module, name); r != CUDA_SUCCESS) return r;
    }
    return CUDA_SUCCESS;
  }
};

inline CUresult LaunchWith(CUfunction f, CUstream s, void** params) {
  return cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, params, nullptr);
}

inline CUresult Spin(const Kernels& k, CUstream s, uint64_t ns) {
  void* params[] = {&ns};
  return LaunchWith(k.spin, s, params);
}

inline CUresult Fill(const Kernels& k, CUstream s, CUdeviceptr dst, uint32_t value, uint64_t count,
                     uint64_t ns = 0) {
  void* params[] = {&dst, &value, &count, &ns};
  return LaunchWith(k.fill, s, params);
}

inline CUresult Add(const Kernels& k, CUstream s, CUdeviceptr dst, CUdeviceptr src, uint64_t count,
                    uint64_t ns = 0) {
  void* params[] = {&dst, &src, &count, &ns};
  return LaunchWith(k.add, s, params);
}

inline CUresult Append(const Kernels& k, CUstream s, CUdeviceptr log, uint32_t value,
                       uint64_t ns = 0) {
  void* params[] = {&log, &value, &ns};
  return LaunchWith(k.append, s, params);
}

// fakecuda_sm_probe (or a PTX probe) on `blocks` blocks: out[block] = its SM id.
inline CUresult Probe(CUfunction f, CUstream s, CUdeviceptr out, unsigned blocks, uint64_t ns = 0) {
  void* params[] = {&out, &ns};
  return cuLaunchKernel(f, blocks, 1, 1, 32, 1, 1, 0, s, params, nullptr);
}

// Kernel nodes of fakecuda_append_u32 for graphs built node by node; each node's arguments live
// as long as this object.
class AppendNodes {
 public:
  AppendNodes(const Kernels* kernels, CUdeviceptr log) : kernels_(kernels), log_(log) {}

  // The parameters of an append of `value` taking `ns` (also for cuGraphExecKernelNodeSetParams).
  CUDA_KERNEL_NODE_PARAMS Params(uint32_t value, uint64_t ns = 0) {
    args_.push_back(std::make_unique<Args>(Args{log_, value, ns}));
    Args* a = args_.back().get();
    a->params[0] = &a->log;
    a->params[1] = &a->value;
    a->params[2] = &a->ns;
    CUDA_KERNEL_NODE_PARAMS p{};
    p.func = kernels_->append;
    p.gridDimX = p.gridDimY = p.gridDimZ = p.blockDimX = p.blockDimY = p.blockDimZ = 1;
    p.kernelParams = a->params;
    return p;
  }
  // Adds the node to `g` after `deps`.
  CUgraphNode Add(CUgraph g, uint32_t value, std::vector<CUgraphNode> deps, uint64_t ns = 0) {
    const CUDA_KERNEL_NODE_PARAMS p = Params(value, ns);
    CUgraphNode node = nullptr;
    EXPECT_EQ(CUDA_SUCCESS, cuGraphAddKernelNode(&node, g, deps.data(), deps.size(), &p));
    return node;
  }

 private:
  struct Args {
    CUdeviceptr log;
    uint32_t value;
    uint64_t ns;
    void* params[3] = {};
  };
  const Kernels* kernels_;
  CUdeviceptr log_;
  std::vector<std::unique_ptr<Args>> args_;
};

// The entries of an append log (log[0] is their count).
inline std::vector<uint32_t> LogEntries(CUdeviceptr log) {
  const auto* words = reinterpret_cast<const uint32_t*>(log);
  return std::vector<uint32_t>(words + 1, words + 1 + words[0]);
}

inline std::vector<uint32_t> Words(CUdeviceptr p, size_t count) {
  const auto* words = reinterpret_cast<const uint32_t*>(p);
  return std::vector<uint32_t>(words, words + count);
}

}  // namespace fakecuda_test

#endif  // MISSILE_TESTS_FAKECUDA_KERNEL_UTIL_H_
