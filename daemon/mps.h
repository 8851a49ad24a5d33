// The node's MPS control daemon, for missiled's `[compute] mps = "start"`: missiled starts
// `nvidia-cuda-mps-control -d` before it opens the GPUs (so that it and every tenant started
// after it are MPS clients) and asks it to quit when missiled stops (the quit completes once
// missiled and the tenants have gone). A control daemon that
// already answers in the pipe directory is used as it is and left running.
//
// Talking to the control daemon is what NVIDIA documents for it: the program's stdin takes one
// command ("get_server_list", "quit"), and CUDA_MPS_PIPE_DIRECTORY / CUDA_MPS_LOG_DIRECTORY
// say where it lives. Every command runs with a deadline, so a stuck control daemon cannot hang
// missiled. Not thread-safe: missiled's start-up thread owns it.
#ifndef MISSILE_DAEMON_MPS_H_
#define MISSILE_DAEMON_MPS_H_

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace missile::daemon {

struct MpsOptions {
  std::string control = "nvidia-cuda-mps-control";  // a name looked up in PATH, or a path
  std::string pipe_directory = "/tmp/nvidia-mps";
  std::string log_directory = "/var/log/nvidia-mps";
  std::chrono::milliseconds start_timeout{20000};
};

// Runs the control program with `command` on its stdin (nothing when empty) and extra
// arguments `arg` (when not empty), in the options' directories; its exit status 0 is OK,
// anything else (or the deadline) is an error that says what happened.
absl::Status RunMpsControl(const MpsOptions& options, std::string_view arg,
                           std::string_view command, std::chrono::milliseconds deadline);

// Whether an MPS control daemon's socket is in `pipe_directory` (then processes that use that
// pipe directory become MPS clients). Only looks; starts nothing.
bool MpsControlRunning(const std::string& pipe_directory);

class MpsControl {
 public:
  // Makes sure an MPS control daemon answers in options.pipe_directory, starting one when none
  // does. Sets CUDA_MPS_PIPE_DIRECTORY and CUDA_MPS_LOG_DIRECTORY in missiled's environment.
  static absl::StatusOr<std::unique_ptr<MpsControl>> Start(const MpsOptions& options);
  // Asks a control daemon this object started to quit, from a process of its own that waits
  // (up to a minute) while missiled, an MPS client too, exits; leaves others alone.
  ~MpsControl();
  MpsControl(const MpsControl&) = delete;
  MpsControl& operator=(const MpsControl&) = delete;

  bool started_here() const { return started_here_; }

 private:
  explicit MpsControl(MpsOptions options) : options_(std::move(options)) {}

  MpsOptions options_;
  bool started_here_ = false;
};

}  // namespace missile::daemon

#endif  // MISSILE_DAEMON_MPS_H_
