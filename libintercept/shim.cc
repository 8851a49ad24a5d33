#include "shim.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "entry_table.h"
#include "fmt/format.h"
#include "copy.h"
#include "daemon_client.h"
#include "memory.h"
#include "graph_split.h"
#include "pacer.h"
#include "session_manager.h"
#include "real_driver.h"
#include "spdlog/sinks/stdout_sinks.h"

namespace missile::shim {
namespace {

thread_local bool t_resolving = false;

spdlog::level::level_enum ToSpdlog(LogLevel level) {
  switch (level) {
    case LogLevel::kTrace: return spdlog::level::trace;
    case LogLevel::kDebug: return spdlog::level::debug;
    case LogLevel::kInfo: return spdlog::level::info;
    case LogLevel::kWarn: return spdlog::level::warn;
    case LogLevel::kError: return spdlog::level::err;
    case LogLevel::kOff: return spdlog::level::off;
  }
  return spdlog::level::warn;
}

// Stubs that forwarded entry points resolve to when there is nothing real to call.
CUresult CUDAAPI NotInitializedStub() { return CUDA_ERROR_NOT_INITIALIZED; }
CUresult CUDAAPI NoDriverStub() { return CUDA_ERROR_NO_DEVICE; }
CUresult CUDAAPI NotFoundStub() { return CUDA_ERROR_NOT_FOUND; }

// The base name of an exported symbol: cuMemcpyHtoDAsync_v2_ptsz -> cuMemcpyHtoDAsync.
std::string_view BaseName(std::string_view symbol) {
  for (std::string_view suffix : {"_ptds", "_ptsz"}) {
    if (symbol.ends_with(suffix)) symbol.remove_suffix(suffix.size());
  }
  size_t v = symbol.rfind("_v");
  if (v != std::string_view::npos && v + 2 < symbol.size() &&
      std::all_of(symbol.begin() + v + 2, symbol.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    symbol = symbol.substr(0, v);
  }
  return symbol;
}

void WriteReportAtExit() { Shim::Get().WriteReport(); }

}  // namespace

Shim::Shim() : config_(ParseConfig([](const char* name) { return getenv(name); })) {
  // The shim's abseil (linked in; with MISSILE_SHIM_STATIC off, the system's) is built without
  // NDEBUG, which checks every Mutex acquisition for lock-order cycles: a global graph updated
  // on each paced launch, and an abort of the program if it ever found one. The unit tests keep
  // the check (docs/pacing.md, "What a BE's pacing costs it").
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  log_ = std::make_shared<spdlog::logger>("missile.shim",
                                          std::make_shared<spdlog::sinks::stderr_sink_mt>());
  log_->set_pattern("missile[%P] %l: %v");
  log_->set_level(ToSpdlog(config_.log_level));
  tracing_ = config_.log_level <= LogLevel::kDebug;
  for (const std::string& warning : config_.warnings) log_->warn("{}", warning);
  HookFunctions(hook_fn_);
  if (!config_.report.empty()) atexit(WriteReportAtExit);
}

CUresult Shim::ResolveSlow() {
  if (t_resolving) return CUDA_ERROR_NOT_INITIALIZED;  // the driver re-entered us while loading
  std::call_once(once_, [this] {
    t_resolving = true;
    ResolveOnce();
    t_resolving = false;
  });
  return state_.load(std::memory_order_acquire) == kResolved ? CUDA_SUCCESS : failure_;
}

void Shim::ResolveOnce() {
  absl::StatusOr<RealDriver> driver =
      OpenRealDriver(config_.real_driver_path, reinterpret_cast<const void*>(&WriteReportAtExit));
  if (!driver.ok()) {
    log_->error("{}; every CUDA call will fail with CUDA_ERROR_NO_DEVICE",
                std::string(driver.status().message()));
    failure_ = CUDA_ERROR_NO_DEVICE;
    state_.store(kFailed, std::memory_order_release);
    return;
  }
  driver_ = driver->handle;
  driver_path_ = driver->path;
  for (size_t i = 0; i < kHookCount; ++i) {
    std::string name(kHookInfo[i].symbol);
    real_[i] = dlsym(driver_, name.c_str());
    if (real_[i] != nullptr) hook_by_real_.emplace(real_[i], static_cast<HookId>(i));
  }
  api_.Resolve(driver_);
  if (!config_.disabled) {
    // The memory, copy and pacing paths each reach the daemon through the one session manager.
    // Each GPU's copy gate and pacer live in its SessionGpu, which the session manager owns.
    connector_ = std::make_unique<DaemonConnector>();
    masker_ = std::make_unique<TpcMasker>(api_, log_.get());
    sessions_ = std::make_unique<SessionManager>(config_, api_, connector_.get(), log_.get(),
                                                 masker_.get());
    memory_ = std::make_unique<MemoryManager>(config_, api_, sessions_.get(), log_.get());
    copies_ = std::make_unique<CopyManager>(api_, sessions_.get(), &memory_->table());
    graphs_ = std::make_unique<GraphSplitter>(api_, log_.get());
  }
  if (config_.disabled) {
    // Plain pass-through: trampolines jump straight into the driver.
    for (size_t i = 0; i < kHookCount; ++i) {
      int index = ExportIndexOf(static_cast<HookId>(i));
      if (index >= 0 && real_[i] != nullptr) StoreEntry(index, real_[i]);
    }
  }
  log_->info("real driver {} ({} of {} hooked entry points present){}", driver_path_,
             hook_by_real_.size(), kHookCount, config_.disabled ? ", MISSILE_DISABLE=1" : "");
  state_.store(kResolved, std::memory_order_release);
}

CUresult Shim::MissingSymbol(HookId id) {
  if (!missing_logged_[Index(id)].exchange(true)) {
    log_->error("{}: the real driver ({}) does not export it; returning CUDA_ERROR_NOT_FOUND",
                kHookInfo[Index(id)].symbol, driver_path_);
  }
  return CUDA_ERROR_NOT_FOUND;
}

void* Shim::ResolveForward(uint32_t index) {
  if (index >= kExportCount) return reinterpret_cast<void*>(&NotFoundStub);
  CUresult status = EnsureResolved();
  if (status == CUDA_ERROR_NOT_INITIALIZED) return reinterpret_cast<void*>(&NotInitializedStub);
  if (status != CUDA_SUCCESS) return reinterpret_cast<void*>(&NoDriverStub);
  std::string name(kExportNames[index]);
  void* fn = dlsym(driver_, name.c_str());
  if (fn == nullptr) {
    log_->error("{}: the real driver ({}) does not export it; returning CUDA_ERROR_NOT_FOUND",
                name, driver_path_);
    fn = reinterpret_cast<void*>(&NotFoundStub);
  }
  StoreEntry(index, fn);
  return fn;
}

void* Shim::SwapProcAddress(const char* symbol, void* real_fn, int version, uint64_t flags) {
  proc_lookups_.fetch_add(1, std::memory_order_relaxed);
  auto it = hook_by_real_.find(real_fn);
  if (it != hook_by_real_.end()) {
    handed_out_[Index(it->second)].store(true, std::memory_order_relaxed);
    if (tracing_) {
      log_->debug("cuGetProcAddress({}, version {}, flags {}) -> hook {}", symbol, version, flags,
                  kHookInfo[Index(it->second)].symbol);
    }
    return hook_fn_[Index(it->second)];
  }
  // Not one of ours. If its name is a hooked family member, the driver handed out a variant the
  // shim does not know: record it so the report shows what escaped interception.
  std::string_view base = BaseName(symbol);
  for (size_t i = 0; i < kHookCount; ++i) {
    if (BaseName(kHookInfo[i].symbol) == base) {
      std::lock_guard<std::mutex> lock(unmatched_mu_);
      std::string key = fmt::format("{}@{}/{}", symbol, version, flags);
      if (unmatched_[key]++ == 0) {
        log_->warn("cuGetProcAddress({}, version {}, flags {}) returned a function the shim does "
                   "not hook; calls through it are not intercepted", symbol, version, flags);
      }
      break;
    }
  }
  return real_fn;
}

void Shim::Trace(HookId id, CUresult result, const std::string& args) {
  log_->debug("{}({}) = {}", kHookInfo[Index(id)].symbol, args, static_cast<int>(result));
}

void Shim::WriteReport() {
  std::string text = fmt::format("# libmissile report: pid {}, driver {}, {}\n", getpid(),
                                 driver_path_.empty() ? "(not loaded)" : driver_path_,
                                 config_.disabled ? "disabled (pass-through)" : "enabled");
  text += "# calls  entry point  family  via-cuGetProcAddress\n";
  uint64_t total = 0;
  for (size_t i = 0; i < kHookCount; ++i) {
    uint64_t n = counts_[i].load(std::memory_order_relaxed);
    bool handed = handed_out_[i].load(std::memory_order_relaxed);
    if (n == 0 && !handed) continue;
    total += n;
    text += fmt::format("{} {} {} {}\n", n, kHookInfo[i].symbol, kHookInfo[i].family,
                        handed ? "yes" : "no");
  }
  text += fmt::format("# total {} intercepted calls; {} cuGetProcAddress answers inspected\n",
                      total, proc_lookups_.load());
  if (memory_ != nullptr) {
    text += fmt::format("# missiled: {}; {} allocations served from daemon blocks, {} bytes held at exit\n",
                        memory_->connected() ? "connected" : "not connected",
                        memory_->allocations(), memory_->leased_bytes());
    if (memory_->passthrough_calls() > 0) {
      text += fmt::format("# {} allocations ({} bytes) went to the driver directly, outside "
                          "missiled's quota (no serving session, MISSILE_NO_DAEMON=passthrough)\n",
                          memory_->passthrough_calls(), memory_->passthrough_bytes());
    }
  }
  if (copies_ != nullptr) {
    text += fmt::format("# {} host-device copies went through the PCIe scheduler\n",
                        copies_->scheduled());
  }
  if (sessions_ != nullptr) text += fmt::format("# pacing: {}\n", PacingSummary(*sessions_));
  if (graphs_ != nullptr) text += fmt::format("# graphs: {}\n", graphs_->Summary());
  if (sessions_ != nullptr) {
    if (std::string reserve = ReserveSummary(*sessions_, masker_.get()); !reserve.empty()) {
      text += fmt::format("# reserve: {}\n", reserve);
    }
  }
  {
    std::lock_guard<std::mutex> lock(unmatched_mu_);
    for (const auto& [key, n] : unmatched_) {
      text += fmt::format("# not intercepted: {} handed out {} times\n", key, n);
    }
  }
  if (config_.report == "stderr" || config_.report == "-") {
    fputs(text.c_str(), stderr);
    return;
  }
  std::string path = ExpandReportPath(config_.report, getpid());
  FILE* f = fopen(path.c_str(), "w");
  if (f == nullptr) {
    log_->error("cannot write the report to {}", path);
    return;
  }
  fputs(text.c_str(), f);
  fclose(f);
}

}  // namespace missile::shim

extern "C" void* missile_resolve_forward(uint32_t index) {
  return missile::shim::Shim::Get().ResolveForward(index);
}
