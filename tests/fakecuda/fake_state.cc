#include "fake_state.h"

#include <pthread.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <unordered_map>

#include "entry_points.h"

namespace fakecuda {
namespace {

std::atomic<FakeState*> g_state{nullptr};

// Installed when the library is loaded, so it runs in every child before any fake call.
void OnForkChild() {
  g_state.store(nullptr);  // the parent's state is leaked: its locks may be held, its threads gone
  ContextManager::ResetThreadAfterFork();
  StreamManager::ResetThreadAfterFork();
}

__attribute__((constructor)) void InstallForkHandler() {
  pthread_atfork(nullptr, nullptr, &OnForkChild);
}

constexpr const char* kEntryNames[] = {
#define FAKECUDA_IMPL(base, exported, version, suffix) #exported,
#define FAKECUDA_NOIMPL(base, exported, version, suffix)
#include "entry_points.inc"
#undef FAKECUDA_IMPL
#undef FAKECUDA_NOIMPL
};
static_assert(sizeof(kEntryNames) / sizeof(kEntryNames[0]) == kNumEntryPoints);

}  // namespace

const char* EntryName(EntryId id) { return kEntryNames[static_cast<int>(id)]; }

std::optional<EntryId> EntryIdByName(std::string_view name) {
  static const auto* const by_name = [] {
    auto* m = new std::unordered_map<std::string_view, EntryId>();
    for (int i = 0; i < kNumEntryPoints; ++i) (*m)[kEntryNames[i]] = static_cast<EntryId>(i);
    return m;
  }();
  auto it = by_name->find(name);
  if (it == by_name->end()) return std::nullopt;
  return it->second;
}

CUresult Enter(EntryId id, bool needs_init) {
  FakeState& state = FakeState::Get();
  if (CUresult r = state.stats().OnCall(id); r != CUDA_SUCCESS) return r;
  if (needs_init && !state.initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  return CUDA_SUCCESS;
}

FakeState& FakeState::Get() {
  FakeState* state = g_state.load(std::memory_order_acquire);
  if (state != nullptr) return *state;
  auto* fresh = new FakeState();
  if (g_state.compare_exchange_strong(state, fresh, std::memory_order_acq_rel)) return *fresh;
  delete fresh;  // another thread won; its state is the one
  return *state;
}

FakeState::FakeState()
    : config_(Config::FromEnvironment()),
      tpcs_(config_.dead_tpcs),
      launch_callbacks_(config_.launch_desc_version),
      contexts_(this),
      memory_(this),
      vmm_(this),
      streams_(this),
      pools_(this),
      copies_(this) {
  for (const FailRule& rule : config_.fail_rules) {
    if (std::optional<EntryId> id = EntryIdByName(rule.name)) {
      stats_.ArmAbsolute(*id, rule.nth, rule.code);
    }
  }
}

CUresult FakeState::Init(unsigned flags) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (initialized()) return CUDA_SUCCESS;
  std::lock_guard<std::mutex> lock(init_mu_);
  if (initialized()) return CUDA_SUCCESS;
  if (access("/dev/nvidiactl", F_OK) == 0 && !config_.allow_with_gpu) {
    static std::once_flag once;
    std::call_once(once, [] {
      std::fputs(
          "fakecuda: refusing to run on a machine with a real NVIDIA GPU (this is a test double)\n",
          stderr);
    });
    return CUDA_ERROR_NO_DEVICE;
  }
  std::string error = config_.error;
  for (const FailRule& rule : config_.fail_rules) {
    if (!EntryIdByName(rule.name)) {
      if (!error.empty()) error += "; ";
      error += "FAKECUDA_FAIL names '" + rule.name + "', which the fake does not export";
    }
  }
  if (!error.empty()) {
    std::fprintf(stderr, "fakecuda: bad environment: %s\n", error.c_str());
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (config_.num_devices == 0) return CUDA_ERROR_NO_DEVICE;
  shared_ = SharedState::Open(config_, &error);
  if (shared_ == nullptr) {
    std::fprintf(stderr, "%s\n", error.c_str());
    return CUDA_ERROR_OPERATING_SYSTEM;
  }
  phys_ = std::make_unique<PhysAllocator>(shared_.get(), config_);
  link_ = std::make_unique<PcieLink>(shared_.get(), config_.pcie_bytes_per_us);
  engine_ = std::make_unique<ComputeEngine>(shared_.get(), config_.engine_sharing,
                                            config_.timeslice_ns);
  initialized_.store(true, std::memory_order_release);
  return CUDA_SUCCESS;
}

}  // namespace fakecuda
