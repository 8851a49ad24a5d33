#include "daemon/config.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <toml++/toml.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <exception>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/internal/config_parser.h"

namespace missile::daemon {
namespace {

using config_internal::AsAbsl;
using config_internal::OctalMode;
using config_internal::Parser;

// A config file is a few kilobytes; anything near this is a mistake (the wrong file).
constexpr size_t kMaxConfigBytes = size_t{1} << 20;

// "<path>:<line>: " or "line <line>: " (nothing known: "<path>: " or "").
std::string Where(const std::string& path, uint32_t line) {
  if (path.empty()) return line == 0 ? "" : absl::StrCat("line ", line, ": ");
  return line == 0 ? absl::StrCat(path, ": ") : absl::StrCat(path, ":", line, ": ");
}

// `path` names the text in messages ("" for text that came from no file).
absl::StatusOr<DaemonConfig> ParseNamed(std::string_view text, const std::string& path) {
  try {
    toml::table root = toml::parse(text, std::string_view(path));
    DaemonConfig config;
    Parser parser(&config);
    parser.ParseRoot(root);
    if (parser.problems().empty()) parser.CheckRules();
    std::vector<Parser::Problem>& problems = parser.problems();
    if (problems.empty()) return config;
    std::stable_sort(problems.begin(), problems.end(), [](const auto& a, const auto& b) {
      return (a.line == 0 ? UINT32_MAX : a.line) < (b.line == 0 ? UINT32_MAX : b.line);
    });
    std::vector<std::string> lines;
    for (const Parser::Problem& problem : problems) {
      lines.push_back(Where(path, problem.line) + problem.text);
    }
    return absl::InvalidArgumentError(absl::StrJoin(lines, "\n"));
  } catch (const toml::parse_error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(path, e.source().begin.line), "invalid TOML at column ",
                     e.source().begin.column, ": ", AsAbsl(e.description())));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(path.empty() ? "config" : path, ": ", e.what()));
  }
}

// Closes a file descriptor on every path out.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() {
    if (fd_ >= 0) close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

std::string DaemonSection::FdSocketPath() const {
  return fd_socket.empty() ? socket + ".fd" : fd_socket;
}

std::string DaemonSection::StateFilePath(const char* state_directory) const {
  if (!state_file.empty()) return state_file;
  if (state_directory == nullptr || state_directory[0] == '\0') return "";
  // systemd passes several directories separated by ':' when a unit names several.
  std::string dir(state_directory);
  dir = dir.substr(0, dir.find(':'));
  return dir + "/policy.toml";
}

uint64_t GpuSection::PoolLimitBytes(uint64_t gpu_bytes) const {
  return std::min(pool_limit.Resolve(gpu_bytes), gpu_bytes);
}

uint64_t GpuSection::PreallocBytes(uint64_t gpu_bytes) const {
  return std::min(prealloc.Resolve(gpu_bytes), PoolLimitBytes(gpu_bytes));
}

ClassQuotaBytes ClassSection::ResolveQuotas(uint64_t pool_bytes) const {
  ClassQuotaBytes bytes;
  bytes.class_quota_bytes = std::min(class_quota.Resolve(pool_bytes), pool_bytes);
  bytes.tenant_quota_bytes = std::min(tenant_quota.Resolve(pool_bytes), bytes.class_quota_bytes);
  return bytes;
}

absl::StatusOr<DaemonConfig> ParseConfig(std::string_view toml_text) {
  return ParseNamed(toml_text, "");
}

absl::StatusOr<DaemonConfig> LoadConfig(const std::string& path, bool must_exist) {
  // O_NONBLOCK: opening a FIFO must not hang the daemon's start (it is rejected below).
  FileDescriptor fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (fd.get() < 0) {
    const int error = errno;
    if (error == ENOENT && !must_exist) return DaemonConfig{};
    return absl::ErrnoToStatus(error, absl::StrCat("cannot open config file ", path));
  }
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot stat config file ", path));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(path, ": not a regular file"));
  }
  // The file decides who may administer the daemon (admin_group), so only root and the
  // daemon's own user may be able to change it.
  if (st.st_mode & (S_IWOTH | S_IWGRP)) {
    const bool everyone = (st.st_mode & S_IWOTH) != 0;
    return absl::FailedPreconditionError(absl::StrCat(
        path, everyone ? ": every user" : ": its group", " may write it (mode ",
        OctalMode(st.st_mode & 07777),
        "), and it decides who may administer the daemon: chmod go-w ", path));
  }
  if (st.st_uid != 0 && st.st_uid != geteuid()) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, ": owned by uid ", st.st_uid, ", not by root or the daemon's user (uid ", geteuid(),
        "), and it decides who may administer the daemon: chown root ", path));
  }
  std::string text;
  char buffer[16384];
  while (true) {
    const ssize_t n = read(fd.get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot read config file ", path));
    if (n == 0) break;
    text.append(buffer, static_cast<size_t>(n));
    if (text.size() > kMaxConfigBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": larger than ", FormatSize(kMaxConfigBytes), "; not a config file"));
    }
  }
  return ParseNamed(text, path);
}

}  // namespace missile::daemon
