#include "subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

extern char** environ;

namespace missile::testing {

namespace {

std::vector<std::string> MergeEnv(const std::map<std::string, std::string>& env) {
  std::map<std::string, std::string> merged;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv(*e);
    size_t eq = kv.find('=');
    if (eq != std::string::npos) merged[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& [k, v] : env) {
    if (v == "<unset>") {
      merged.erase(k);
    } else {
      merged[k] = v;
    }
  }
  std::vector<std::string> out;
  for (const auto& [k, v] : merged) out.push_back(k + "=" + v);
  return out;
}

}  // namespace

ProcessResult Run(const std::vector<std::string>& argv,
                  const std::map<std::string, std::string>& env, double timeout_s) {
  ProcessResult result;
  std::vector<std::string> env_strings = MergeEnv(env);
  std::vector<char*> envp, args;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (auto& s : argv_copy) args.push_back(s.data());
  args.push_back(nullptr);

  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) {
    result.err = "pipe failed";
    return result;
  }
  pid_t pid = fork();
  if (pid == 0) {
    dup2(out_pipe[1], 1);
    dup2(err_pipe[1], 2);
    setpgid(0, 0);
    execve(args[0], args.data(), envp.data());
    fprintf(stderr, "execve %s: %s\n", args[0], strerror(errno));
    _exit(127);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_fds = 2;
  while (open_fds > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      result.timed_out = true;
      kill(-pid, SIGKILL);
      kill(pid, SIGKILL);
      break;
    }
    if (poll(fds, 2, static_cast<int>(left.count())) < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd >= 0 && (fds[i].revents & (POLLIN | POLLHUP))) {
        char buf[4096];
        ssize_t n = read(fds[i].fd, buf, sizeof(buf));
        if (n > 0) {
          sinks[i]->append(buf, n);
        } else {
          close(fds[i].fd);
          fds[i].fd = -1;
          --open_fds;
        }
      }
    }
  }
  for (auto& f : fds) {
    if (f.fd >= 0) close(f.fd);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
  }
  return result;
}


Child::~Child() {
  if (running()) {
    Kill(SIGKILL);
    Wait(5);
  }
  if (in_ >= 0) close(in_);
  if (out_fd_ >= 0) close(out_fd_);
}

bool Child::Start(const std::vector<std::string>& argv,
                  const std::map<std::string, std::string>& env, const std::string& stderr_path) {
  // A Child may be started again once the previous process is gone (a restarted daemon).
  if (running()) return false;
  if (in_ >= 0) close(in_);
  if (out_fd_ >= 0) close(out_fd_);
  in_ = out_fd_ = -1;
  reaped_ = false;
  status_ = 0;
  out_.clear();
  consumed_ = 0;
  std::vector<std::string> env_strings = MergeEnv(env);
  std::vector<char*> envp, args;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (auto& s : argv_copy) args.push_back(s.data());
  args.push_back(nullptr);
  int in_pipe[2], out_pipe[2];
  if (pipe2(in_pipe, O_CLOEXEC) != 0 || pipe2(out_pipe, O_CLOEXEC) != 0) return false;
  int err_fd = -1;
  if (!stderr_path.empty()) {
    err_fd = open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (err_fd < 0) return false;
  }
  pid_ = fork();
  if (pid_ == 0) {
    dup2(in_pipe[0], 0);
    dup2(out_pipe[1], 1);
    if (err_fd >= 0) dup2(err_fd, 2);
    execve(args[0], args.data(), envp.data());
    _exit(127);
  }
  close(in_pipe[0]);
  close(out_pipe[1]);
  if (err_fd >= 0) close(err_fd);
  in_ = in_pipe[1];
  out_fd_ = out_pipe[0];
  return pid_ > 0;
}

std::string Child::WaitForLine(const std::string& prefix, double timeout_s) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (true) {
    size_t nl;
    while ((nl = out_.find('\n', consumed_)) != std::string::npos) {
      std::string line = out_.substr(consumed_, nl - consumed_);
      consumed_ = nl + 1;
      if (line.rfind(prefix, 0) == 0) return line;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 || out_fd_ < 0) return "";
    pollfd p{out_fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[4096];
    ssize_t n = read(out_fd_, buf, sizeof(buf));
    if (n <= 0) {
      close(out_fd_);
      out_fd_ = -1;
    } else {
      out_.append(buf, n);
    }
  }
}

void Child::CloseStdin() {
  if (in_ >= 0) close(in_);
  in_ = -1;
}

void Child::Kill(int sig) {
  if (running()) kill(pid_, sig);
}

int Child::Wait(double timeout_s) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (!reaped_) {
    int status = 0;
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      reaped_ = true;
      status_ = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
      break;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid_, SIGKILL);
      deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (out_fd_ >= 0) {
    char buf[4096];
    ssize_t n;
    while ((n = read(out_fd_, buf, sizeof(buf))) > 0) out_.append(buf, n);
  }
  return status_;
}

TempDir::TempDir() {
  const char* base = getenv("TMPDIR");
  std::string pattern = std::string(base != nullptr ? base : "/tmp") + "/missile-test-XXXXXX";
  char* made = mkdtemp(pattern.data());
  path_ = made != nullptr ? made : "";
}

TempDir::~TempDir() {
  std::error_code ec;
  if (!path_.empty()) std::filesystem::remove_all(path_, ec);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace missile::testing
