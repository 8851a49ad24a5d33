#include "kernels.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <string_view>

#include "address_space.h"
#include "engine.h"

namespace fakecuda {
namespace {

constexpr const char* kKernelNames[kNumKernels] = {
    "fakecuda_spin",
    "fakecuda_fill_u32",
    "fakecuda_add_u32",
    "fakecuda_append_u32",
    "fakecuda_sm_probe",
};

// Argument i of the launch; false when the launch passed none.
template <typename T>
bool Arg(void** params, int i, T* out) {
  if (params == nullptr || params[i] == nullptr) return false;
  std::memcpy(out, params[i], sizeof(T));
  return true;
}

// [addr, addr + count words) is 4-byte aligned memory the fake handed out.
CUresult CheckWords(const AddressSpace& memory, CUdeviceptr addr, uint64_t count, bool write) {
  if (addr == 0 || addr % sizeof(uint32_t) != 0 || count > (~uint64_t{0} >> 2)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (count == 0) return CUDA_SUCCESS;
  return memory.CheckAccess(addr, count * sizeof(uint32_t), write);
}

std::mutex& AppendMutex() {
  static auto* mu = new std::mutex();  // never destroyed: stream workers may outlive statics
  return *mu;
}

void Append(const AddressSpace* memory, CUdeviceptr log, uint32_t value) {
  std::lock_guard<std::mutex> lock(AppendMutex());
  std::atomic_ref<uint32_t> count(*reinterpret_cast<uint32_t*>(log));
  const uint32_t n = count.load();
  const CUdeviceptr slot = log + sizeof(uint32_t) * (uint64_t{n} + 1);
  if (memory->CheckAccess(slot, sizeof(uint32_t), /*write=*/true) != CUDA_SUCCESS) {
    std::fprintf(stderr, "fakecuda: fakecuda_append_u32: log at 0x%llx is full (%u entries)\n",
                 static_cast<unsigned long long>(log), n);
    return;
  }
  *reinterpret_cast<uint32_t*>(slot) = value;
  count.store(n + 1);
}

bool IsPtxSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

bool IsPtxIdentifierChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '$';
}

// Entry `name` of a PTX text: CUDA_SUCCESS when its body (up to the next .entry) reads %smid,
// which makes it an SM probe; CUDA_ERROR_NOT_SUPPORTED for an entry the fake cannot run;
// CUDA_ERROR_NOT_FOUND when there is no ".entry name(".
CUresult PtxEntry(std::string_view ptx, std::string_view name) {
  constexpr std::string_view kEntry = ".entry";
  for (size_t pos = ptx.find(kEntry); pos != std::string_view::npos;) {
    size_t i = pos + kEntry.size();
    const size_t next = ptx.find(kEntry, i);
    pos = next;
    if (i == ptx.size() || !IsPtxSpace(ptx[i])) continue;
    while (i < ptx.size() && IsPtxSpace(ptx[i])) ++i;
    size_t end = i;
    while (end < ptx.size() && IsPtxIdentifierChar(ptx[end])) ++end;
    size_t paren = end;
    while (paren < ptx.size() && IsPtxSpace(ptx[paren])) ++paren;
    if (ptx.substr(i, end - i) != name || paren == ptx.size() || ptx[paren] != '(') continue;
    const std::string_view body =
        ptx.substr(paren, next == std::string_view::npos ? next : next - paren);
    return body.find("%smid") != std::string_view::npos ? CUDA_SUCCESS : CUDA_ERROR_NOT_SUPPORTED;
  }
  return CUDA_ERROR_NOT_FOUND;
}

}  // namespace

CUresult PrepareKernel(KernelKind kind, const unsigned grid[3], void** params,
                       const AddressSpace& memory, KernelCall* out) {
  KernelCall call;
  CUdeviceptr dst = 0;
  CUdeviceptr src = 0;
  uint32_t value = 0;
  uint64_t count = 0;
  switch (kind) {
    case KernelKind::kSpin:
      if (!Arg(params, 0, &call.duration_ns)) return CUDA_ERROR_INVALID_VALUE;
      break;
    case KernelKind::kFillU32:
      if (!Arg(params, 0, &dst) || !Arg(params, 1, &value) || !Arg(params, 2, &count) ||
          !Arg(params, 3, &call.duration_ns)) {
        return CUDA_ERROR_INVALID_VALUE;
      }
      if (CUresult r = CheckWords(memory, dst, count, /*write=*/true); r != CUDA_SUCCESS) return r;
      call.effect = [dst, value, count] {
        std::fill_n(reinterpret_cast<uint32_t*>(dst), count, value);
      };
      break;
    case KernelKind::kAddU32:
      if (!Arg(params, 0, &dst) || !Arg(params, 1, &src) || !Arg(params, 2, &count) ||
          !Arg(params, 3, &call.duration_ns)) {
        return CUDA_ERROR_INVALID_VALUE;
      }
      if (CUresult r = CheckWords(memory, dst, count, /*write=*/true); r != CUDA_SUCCESS) return r;
      if (CUresult r = CheckWords(memory, src, count, /*write=*/false); r != CUDA_SUCCESS) {
        return r;
      }
      call.effect = [dst, src, count] {
        auto* d = reinterpret_cast<uint32_t*>(dst);
        const auto* s = reinterpret_cast<const uint32_t*>(src);
        for (uint64_t i = 0; i < count; ++i) d[i] += s[i];
      };
      break;
    case KernelKind::kAppendU32:
      if (!Arg(params, 0, &dst) || !Arg(params, 1, &value) || !Arg(params, 2, &call.duration_ns)) {
        return CUDA_ERROR_INVALID_VALUE;
      }
      if (CUresult r = CheckWords(memory, dst, 1, /*write=*/true); r != CUDA_SUCCESS) return r;
      call.effect = [memory = &memory, dst, value] { Append(memory, dst, value); };
      break;
    case KernelKind::kSmProbe:
      if (!Arg(params, 0, &call.sm_out) || !Arg(params, 1, &call.duration_ns)) {
        return CUDA_ERROR_INVALID_VALUE;
      }
      call.blocks = uint64_t{grid[0]} * grid[1] * grid[2];
      if (CUresult r = CheckWords(memory, call.sm_out, call.blocks, /*write=*/true);
          r != CUDA_SUCCESS) {
        return r;
      }
      break;
  }
  *out = std::move(call);
  return CUDA_SUCCESS;
}

void RunKernel(ComputeEngine& engine, const TpcLayout& tpcs, int device, const KernelCall& call,
               const TpcMask& disabled) {
  // The common case, nothing masked and no probe, allocates nothing.
  if (disabled.empty() && call.sm_out == 0) {
    engine.Run(device, call.duration_ns, call.effect);
    return;
  }
  const std::vector<uint32_t> sms = tpcs.AllowedSms(disabled);
  if (sms.empty()) {
    // A GPU would never run such a kernel's blocks; the fake completes it, so a test fails
    // instead of hanging.
    std::fputs("fakecuda: a kernel was launched with every TPC disabled\n", stderr);
    engine.Run(device, call.duration_ns, {});
    return;
  }
  if (call.sm_out == 0) {
    engine.Run(device, call.duration_ns, call.effect);
    return;
  }
  engine.Run(device, call.duration_ns, [&call, &sms] {
    auto* out = reinterpret_cast<uint32_t*>(call.sm_out);
    for (uint64_t b = 0; b < call.blocks; ++b) out[b] = sms[b % sms.size()];
  });
}

CUresult ModuleManager::Load(Context* ctx, const void* image, CUmodule* out) {
  if (out == nullptr || image == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const auto* text = static_cast<const char*>(image);
  const bool builtin = std::strncmp(text, kModuleImagePrefix, sizeof(kModuleImagePrefix) - 1) == 0;
  auto module = std::make_unique<Module>();
  module->ctx = ctx;
  if (!builtin) {
    const std::string_view ptx(text);
    if (ptx.find(".version") == std::string_view::npos ||
        ptx.find(".entry") == std::string_view::npos) {
      return CUDA_ERROR_INVALID_IMAGE;
    }
    module->ptx = ptx;
  }
  MutexLock lock(&mu_);
  for (int i = 0; builtin && i < kNumKernels; ++i) {
    module->functions[i].kind = static_cast<KernelKind>(i);
    functions_[reinterpret_cast<CUfunction>(&module->functions[i])] = static_cast<KernelKind>(i);
  }
  live_.insert(module.get());
  *out = reinterpret_cast<CUmodule>(module.get());
  all_.push_back(std::move(module));
  return CUDA_SUCCESS;
}

void ModuleManager::UnloadLocked(Module* module) {
  for (Function& f : module->functions) functions_.erase(reinterpret_cast<CUfunction>(&f));
  for (auto& [name, f] : module->entries) functions_.erase(reinterpret_cast<CUfunction>(f.get()));
  live_.erase(module);
}

CUresult ModuleManager::PtxFunction(Module* module, const char* name, CUfunction* out) {
  auto it = module->entries.find(name);
  if (it == module->entries.end()) {
    if (CUresult r = PtxEntry(module->ptx, name); r != CUDA_SUCCESS) return r;
    auto f = std::make_unique<Function>();
    f->kind = KernelKind::kSmProbe;
    functions_[reinterpret_cast<CUfunction>(f.get())] = f->kind;
    it = module->entries.emplace(name, std::move(f)).first;
  }
  *out = reinterpret_cast<CUfunction>(it->second.get());
  return CUDA_SUCCESS;
}

CUresult ModuleManager::Unload(CUmodule handle) {
  MutexLock lock(&mu_);
  auto it = live_.find(reinterpret_cast<Module*>(handle));
  if (it == live_.end()) return CUDA_ERROR_INVALID_HANDLE;
  UnloadLocked(*it);
  return CUDA_SUCCESS;
}

CUresult ModuleManager::GetFunction(CUmodule handle, const char* name, CUfunction* out) {
  if (out == nullptr || name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  MutexLock lock(&mu_);
  auto it = live_.find(reinterpret_cast<Module*>(handle));
  if (it == live_.end()) return CUDA_ERROR_INVALID_HANDLE;
  if (!(*it)->ptx.empty()) return PtxFunction(*it, name, out);
  for (int i = 0; i < kNumKernels; ++i) {
    if (std::strcmp(name, kKernelNames[i]) == 0) {
      *out = reinterpret_cast<CUfunction>(&(*it)->functions[i]);
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_NOT_FOUND;
}

CUresult ModuleManager::Lookup(CUfunction f, KernelKind* kind) const {
  MutexLock lock(&mu_);
  auto it = functions_.find(f);
  if (it == functions_.end()) return CUDA_ERROR_INVALID_HANDLE;
  *kind = it->second;
  return CUDA_SUCCESS;
}

void ModuleManager::ReleaseContext(Context* ctx) {
  MutexLock lock(&mu_);
  std::vector<Module*> doomed;
  for (Module* m : live_) {
    if (m->ctx == ctx) doomed.push_back(m);
  }
  for (Module* m : doomed) UnloadLocked(m);
}

}  // namespace fakecuda
