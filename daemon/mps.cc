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

// A run of the control program, prepared before fork: after fork only async-signal-safe calls
// (missiled has threads), so the arguments, environment and stdin are all made here.
class ControlRun {
 public:
  ControlRun(const MpsOptions& options, std::string_view arg, std::string_view command)
      : program_(options.control), argument_(arg) {
    // The command goes in a memory file, not a pipe: a program that exits without reading it
    // cannot raise SIGPIPE in missiled.
    in_ = memfd_create("missile-mps-command", MFD_CLOEXEC);
    const std::string line = command.empty() ? std::string() : std::string(command) + "\n";
    if (in_ >= 0 && (write(in_, line.data(), line.size()) != static_cast<ssize_t>(line.size()) ||
                     lseek(in_, 0, SEEK_SET) != 0)) {
      close(in_);
      in_ = -1;
    }
    env_ = {"CUDA_MPS_PIPE_DIRECTORY=" + options.pipe_directory,
            "CUDA_MPS_LOG_DIRECTORY=" + options.log_directory};
    for (char** e = environ; *e != nullptr; ++e) {
      if (std::strncmp(*e, "CUDA_MPS_PIPE_DIRECTORY=", 24) != 0 &&
          std::strncmp(*e, "CUDA_MPS_LOG_DIRECTORY=", 23) != 0) {
        env_.emplace_back(*e);
      }
    }
    for (std::string& e : env_) envp_.push_back(e.data());
    envp_.push_back(nullptr);
    argv_.push_back(program_.data());
    if (!argument_.empty()) argv_.push_back(argument_.data());
    argv_.push_back(nullptr);
  }
  ~ControlRun() {
    if (in_ >= 0) close(in_);
  }
  ControlRun(const ControlRun&) = delete;
  ControlRun& operator=(const ControlRun&) = delete;

  bool ready() const { return in_ >= 0; }
  const std::string& program() const { return program_; }
  const std::string& argument() const { return argument_; }

  // In the child: stdin from the command, output to /dev/null, exec. Never returns.
  [[noreturn]] void Exec() const {
    dup2(in_, STDIN_FILENO);
    const int null = open("/dev/null", O_WRONLY);
    if (null >= 0) {
      dup2(null, STDOUT_FILENO);
      dup2(null, STDERR_FILENO);
    }
    execvpe(program_.c_str(), argv_.data(), envp_.data());
    _exit(127);
  }

 private:
  std::string program_;
  std::string argument_;
  int in_ = -1;
  std::vector<std::string> env_;
  std::vector<char*> envp_;
  std::vector<char*> argv_;
};

}  // namespace

absl::Status RunMpsControl(const MpsOptions& options, std::string_view arg,
                           std::string_view command, std::chrono::milliseconds deadline) {
  const ControlRun run(options, arg, command);
  if (!run.ready()) return absl::InternalError("preparing the MPS command failed");
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork failed: ", std::strerror(errno)));
  if (pid == 0) run.Exec();
  const std::string& program = run.program();
  const std::string& argument = run.argument();
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

bool MpsControlRunning(const std::string& pipe_directory) {
  struct stat st {};
  return stat((pipe_directory + "/control").c_str(), &st) == 0 && S_ISSOCK(st.st_mode);
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
  if (MpsControlRunning(options.pipe_directory) &&
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
  if (!started_here_) return;
  // missiled is itself an MPS client until it exits, and the control daemon's quit waits for
  // its clients: waiting for it here would wait for ourselves (on the H200 the control daemon
  // and its server outlived missiled). So the quit runs in a grandchild that outlives missiled.
  const ControlRun run(options_, "", "quit");
  if (!run.ready()) return;
  const pid_t pid = fork();
  if (pid == 0) {
    setsid();
    if (fork() == 0) run.Exec();
    _exit(0);
  }
  if (pid > 0) waitpid(pid, nullptr, 0);
}

}  // namespace missile::daemon
