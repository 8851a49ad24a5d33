// Runs a program as a child process for multi-process tests: arguments, extra environment,
// captured stdout and stderr, exit status, and a wall-clock limit after which the child is
// killed (so a hung child fails the test instead of hanging it).
// Thread-safety: Run may be called from several threads at once.
#ifndef MISSILE_TESTS_SUPPORT_SUBPROCESS_H_
#define MISSILE_TESTS_SUPPORT_SUBPROCESS_H_

#include <map>
#include <string>
#include <vector>

namespace missile::testing {

struct ProcessResult {
  int exit_code = -1;    // exit status, or -1 when killed by a signal
  int signal = 0;        // the signal that ended it, if any
  bool timed_out = false;
  std::string out;
  std::string err;
};

// Runs argv[0] with argv; `env` is added to (and overrides) this process's environment; a value
// of "<unset>" removes the variable.
ProcessResult Run(const std::vector<std::string>& argv,
                  const std::map<std::string, std::string>& env = {}, double timeout_s = 60);

// A child process that keeps running while the test talks to it: stdin is a pipe the test can
// close, stdout is read line by line, stderr goes to the test's own or a file. The destructor
// kills it (SIGKILL)
// if it still runs.
class Child {
 public:
  Child() = default;
  ~Child();
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  // `stderr_path`: a file that gets the child's stderr (else it shares the test's). Fails while
  // an earlier process of this Child still runs; once it was waited for, starts afresh.
  bool Start(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
             const std::string& stderr_path = "");
  // Reads stdout lines until one starts with `prefix`; returns it, or "" after `timeout_s`.
  std::string WaitForLine(const std::string& prefix, double timeout_s = 20);
  // Everything read from stdout so far.
  const std::string& out() const { return out_; }
  void CloseStdin();
  void Kill(int sig);
  // Waits for the exit; the exit status, or -signal. Collects the rest of stdout.
  int Wait(double timeout_s = 20);
  int pid() const { return pid_; }
  bool running() const { return pid_ > 0 && !reaped_; }

 private:
  int pid_ = -1;
  int in_ = -1;
  int out_fd_ = -1;
  bool reaped_ = false;
  int status_ = 0;
  std::string out_;
  size_t consumed_ = 0;
};

// A fresh, empty directory under TMPDIR (or /tmp), removed by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string ReadFile(const std::string& path);

}  // namespace missile::testing

#endif  // MISSILE_TESTS_SUPPORT_SUBPROCESS_H_
