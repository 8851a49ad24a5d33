#include "logger.h"

#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "spdlog/sinks/stdout_sinks.h"

namespace missile::daemon {
namespace {

constexpr const char* kPattern = "missiled %l: %v";

struct Registry {
  absl::Mutex mu;
  spdlog::level::level_enum level ABSL_GUARDED_BY(mu) = spdlog::level::info;
  spdlog::sink_ptr sink ABSL_GUARDED_BY(mu);
  absl::flat_hash_map<std::string, std::shared_ptr<spdlog::logger>> loggers ABSL_GUARDED_BY(mu);
};

// Never destroyed: components log from their destructors during exit.
Registry& TheRegistry() {
  static Registry* registry = new Registry();
  return *registry;
}

spdlog::sink_ptr StderrSink() {
  static spdlog::sink_ptr sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  return sink;
}

}  // namespace

std::shared_ptr<spdlog::logger> GetLogger(std::string_view component) {
  Registry& r = TheRegistry();
  std::string name = component.empty() ? "missiled" : "missiled." + std::string(component);
  absl::MutexLock lock(&r.mu);
  auto it = r.loggers.find(name);
  if (it != r.loggers.end()) return it->second;
  auto logger = std::make_shared<spdlog::logger>(name, r.sink ? r.sink : StderrSink());
  logger->set_pattern(kPattern);
  logger->set_level(r.level);
  r.loggers.emplace(name, logger);
  return logger;
}

void SetLogLevel(spdlog::level::level_enum level) {
  Registry& r = TheRegistry();
  absl::MutexLock lock(&r.mu);
  r.level = level;
  for (auto& [name, logger] : r.loggers) logger->set_level(level);
}

spdlog::level::level_enum GetLogLevel() {
  Registry& r = TheRegistry();
  absl::MutexLock lock(&r.mu);
  return r.level;
}

absl::StatusOr<spdlog::level::level_enum> ParseLogLevel(std::string_view name) {
  // from_str maps every unknown name to "off", so "off" itself is told apart by name.
  spdlog::level::level_enum level = spdlog::level::from_str(std::string(name));
  if (level == spdlog::level::off && name != "off") {
    return absl::InvalidArgumentError("'" + std::string(name) +
                                      "' is not one of trace, debug, info, warn, error, off");
  }
  return level;
}

void SetLogSinkForTesting(spdlog::sink_ptr sink) {
  Registry& r = TheRegistry();
  absl::MutexLock lock(&r.mu);
  r.sink = std::move(sink);
  for (auto& [name, logger] : r.loggers) {
    logger->sinks().clear();
    logger->sinks().push_back(r.sink ? r.sink : StderrSink());
    logger->set_pattern(kPattern);
  }
}

}  // namespace missile::daemon
