// The daemon's loggers: one named logger per component, all from this one place.
//
// Every component asks GetLogger for its logger ("missiled" for the daemon itself,
// "missiled.<component>" for the others). All of them write to one stderr sink as
// "missiled <level>: <message>" and all follow the level that SetLogLevel last set, including
// loggers created after that call, so --log-level and daemon.log_level reach every component.
// The loggers are not entered in spdlog's global registry: nothing else can change their level.
// Thread-safety: every function may be called from any thread.
#ifndef MISSILE_DAEMON_LOGGER_H_
#define MISSILE_DAEMON_LOGGER_H_

#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "spdlog/spdlog.h"

namespace missile::daemon {

// Component names, so a component and its test name the same logger.
inline constexpr std::string_view kCoreLog = "";  // the daemon itself: "missiled"
inline constexpr std::string_view kPoolLog = "pool";
inline constexpr std::string_view kCopyLog = "copy";
inline constexpr std::string_view kPacingLog = "pacing";
inline constexpr std::string_view kRpcLog = "rpc";
inline constexpr std::string_view kSideChannelLog = "side";

// The logger of `component`, created at the current level on first use; the same object on
// every call with the same name.
std::shared_ptr<spdlog::logger> GetLogger(std::string_view component);

// Sets the level of every daemon logger, those made so far and those made later.
void SetLogLevel(spdlog::level::level_enum level);
spdlog::level::level_enum GetLogLevel();

// "trace", "debug", "info", "warn", "error" or "off"; INVALID_ARGUMENT otherwise.
absl::StatusOr<spdlog::level::level_enum> ParseLogLevel(std::string_view name);

// Sends every daemon logger's output to `sink` instead (nullptr: back to stderr). For tests.
void SetLogSinkForTesting(spdlog::sink_ptr sink);

}  // namespace missile::daemon

#endif  // MISSILE_DAEMON_LOGGER_H_
