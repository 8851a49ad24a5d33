// The daemon's loggers: one named logger per component, all from this one place.
//
// Every component asks GetLogger for its logger ("missiled" for the daemon itself,
// "missiled.<component>" for the others). All of them write to one stderr sink as
// "missiled <level>: <message>" (with a journal priority in front when stderr is the journal:
// see UseJournalPrefixes) and all follow the level that SetLogLevel last set, including
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

// Journal priorities. Under systemd, stderr is a stream to journald, which reads a "<N>" at the
// start of a line as that line's syslog priority (sd-daemon(3)); elsewhere the prefix would be
// noise. The loggers prefix their lines so while UseJournalPrefixes(true) is in force; it is
// set once at first use from StderrIsJournal(getenv("JOURNAL_STREAM"), STDERR_FILENO).
void UseJournalPrefixes(bool on);

// True when `journal_stream` ($JOURNAL_STREAM, "<device>:<inode>" in decimal, as systemd sets
// it for a service whose output goes to the journal) names the file open on `fd`: a program
// whose stderr was redirected elsewhere inherits the variable but no longer matches it.
bool StderrIsJournal(const char* journal_stream, int fd);

// The syslog priority of a level: 7 debug (trace too), 6 info, 4 warning, 3 error, 2 critical.
int SyslogPriority(spdlog::level::level_enum level);

}  // namespace missile::daemon

#endif  // MISSILE_DAEMON_LOGGER_H_
