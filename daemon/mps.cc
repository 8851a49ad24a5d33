#include "mps.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"

namespace missile::daemon {
namespace {

using Clock = std::chrono::steady_clock;

// Waits for `pid` until `deadline`; kills it when it is late. Returns the wait status, or -1
// when it had to be killed.
int WaitWithDeadline(pid_t pid, Clock::time_point deadline) {
  int status = 0;
  for (;;) {
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    if (r < 0 && errno != EINTR) return -1;
    if (Clock::now() >= deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace

absl::Status RunMpsControl(const MpsOptions& options, std::string_view arg,
                           std::string_view command, std::chrono::milliseconds deadline) {
  // The command goes in a memory file, not a pipe: a program that exits without reading it
  // cannot raise SIGPIPE in missiled.
  const int in = memfd_create("missile-mps-command", MFD_CLOEXEC);
  if (in < 0) return absl::InternalError(absl::StrCat("memfd_create: ", std::strerror(errno)));
  const std::string line = command.empty() ? std::string() : std::string(command) + "\n";
  if (write(in, line.data(), line.size()) != static_cast<ssize_t>(line.size()) ||
      lseek(in, 0, SEEK_SET) != 0) {
    close(in);
    return absl::InternalError("writing the MPS command failed");
  }
  const std::string program = options.control;
  const std::string argument(arg);
  // Everything the child needs is built before fork: after it only async-signal-safe calls.
  std::vector<std::string> env_strings = {
      "CUDA_MPS_PIPE_DIRECTORY=" + options.pipe_directory,
      "CUDA_MPS_LOG_DIRECTORY=" + options.log_directory};
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "CUDA_MPS_PIPE_DIRECTORY=", 24) != 0 &&
        std::strncmp(*e, "CUDA_MPS_LOG_DIRECTORY=", 23) != 0) {
      env_strings.emplace_back(*e);
    }
  }
  std::vector<char*> envp;
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<char*> argv{const_cast<char*>(program.c_str())};
  if (!argument.empty()) argv.push_back(const_cast<char*>(argument.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    close(in);
    return absl::InternalError(absl::StrCat("fork failed: ", std::strerror(errno)));
  }
  if (pid == 0) {
    dup2(in, STDIN_FILENO);
    const int null = open("/dev/null", O_WRONLY);
    if (null >= 0) {
      dup2(null, STDOUT_FILENO);
      dup2(null, STDERR_FILENO);
    }
    execvpe(program.c_str(), argv.data(), envp.data());
    _exit(127);
  }
  close(in);
  const int status = WaitWithDeadline(pid, Clock::now() + deadline);
  const std::string what = absl::StrCat(program, argument.empty() ? "" : " ", argument,
                                        command.empty() ? "" : " <<< ", std::string(command));
  if (status == -1) {
    return absl::DeadlineExceededError(
        absl::StrCat(what, ": no answer within ", deadline.count(), " ms"));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
    return absl::NotFoundError(absl::StrCat(what, ": cannot run ", program));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::UnavailableError(absl::StrCat(what, ": exit status ", WEXITSTATUS(status)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<MpsControl>> MpsControl::Start(const MpsOptions& options) {
  std::unique_ptr<MpsControl> mps(new MpsControl(options));
  std::error_code ec;
  for (const std::string& dir : {options.pipe_directory, options.log_directory}) {
    std::filesystem::create_directories(dir, ec);
    if (ec) return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  }
  setenv("CUDA_MPS_PIPE_DIRECTORY", options.pipe_directory.c_str(), 1);
  setenv("CUDA_MPS_LOG_DIRECTORY", options.log_directory.c_str(), 1);
  const std::chrono::milliseconds ask{2000};
  const std::string control_socket = options.pipe_directory + "/control";
  struct stat st {};
  if (stat(control_socket.c_str(), &st) == 0 && S_ISSOCK(st.st_mode) &&
      RunMpsControl(options, "", "get_server_list", ask).ok()) {
    return mps;  // one answers already: use it, leave it running
  }
  if (absl::Status s = RunMpsControl(options, "-d", "", options.start_timeout); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("starting the MPS control daemon: ", s.message()));
  }
  mps->started_here_ = true;
  const Clock::time_point deadline = Clock::now() + options.start_timeout;
  absl::Status answer;
  do {
    answer = RunMpsControl(options, "", "get_server_list", ask);
    if (answer.ok()) return mps;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  } while (Clock::now() < deadline);
  return absl::UnavailableError(absl::StrCat("the MPS control daemon started but does not answer: ",
                                             answer.message()));
}

MpsControl::~MpsControl() {
  if (started_here_) (void)RunMpsControl(options_, "", "quit", std::chrono::milliseconds(10000));
}

}  // namespace missile::daemon
