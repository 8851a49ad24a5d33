#include "logger.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "spdlog/pattern_formatter.h"
#include "spdlog/sinks/stdout_sinks.h"

namespace missile::daemon {
namespace {

constexpr const char* kPattern = "missiled %l: %v";
constexpr const char* kJournalPattern = "%*missiled %l: %v";  // %*: SyslogPrefix

// "<N>" with the message's syslog priority, for journald.
class SyslogPrefix : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    const char prefix[] = {'<', static_cast<char>('0' + SyslogPriority(msg.level)), '>'};
    dest.append(prefix, prefix + sizeof(prefix));
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<SyslogPrefix>();
  }
};

std::unique_ptr<spdlog::formatter> Formatter(bool journal) {
  auto f = std::make_unique<spdlog::pattern_formatter>();
  f->add_flag<SyslogPrefix>('*');
  f->set_pattern(journal ? kJournalPattern : kPattern);
  return f;
}

struct Registry {
  absl::Mutex mu;
  spdlog::level::level_enum level ABSL_GUARDED_BY(mu) = spdlog::level::info;
  bool journal ABSL_GUARDED_BY(mu) = StderrIsJournal(getenv("JOURNAL_STREAM"), STDERR_FILENO);
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
  logger->set_formatter(Formatter(r.journal));
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
    logger->set_formatter(Formatter(r.journal));
  }
}

void UseJournalPrefixes(bool on) {
  Registry& r = TheRegistry();
  absl::MutexLock lock(&r.mu);
  r.journal = on;
  for (auto& [name, logger] : r.loggers) logger->set_formatter(Formatter(on));
}

bool StderrIsJournal(const char* journal_stream, int fd) {
  if (journal_stream == nullptr) return false;
  uintmax_t dev = 0, ino = 0;
  char end = 0;
  if (sscanf(journal_stream, "%ju:%ju%c", &dev, &ino, &end) != 2) return false;
  struct stat st{};
  if (fstat(fd, &st) != 0) return false;
  return static_cast<uintmax_t>(st.st_dev) == dev && static_cast<uintmax_t>(st.st_ino) == ino;
}

int SyslogPriority(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::trace:
    case spdlog::level::debug:
      return 7;
    case spdlog::level::info:
      return 6;
    case spdlog::level::warn:
      return 4;
    case spdlog::level::err:
      return 3;
    case spdlog::level::critical:
      return 2;
    default:
      return 6;
  }
}

}  // namespace missile::daemon
