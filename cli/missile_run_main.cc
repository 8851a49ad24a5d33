// missile-run: runs a program as a Missile tenant (see run_args.h).
// Exit status: the program's own once it runs; 2 bad usage; 127 the program could not be run.
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "missile/version.h"
#include "run_args.h"

namespace {

void Fail(const std::string& reason) { std::fprintf(stderr, "missile-run: %s\n", reason.c_str()); }

std::string SelfExe() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "";
  return std::string(buf, static_cast<size_t>(n));
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  absl::StatusOr<missile::cli::RunArgs> parsed = missile::cli::ParseRunArgs(args);
  if (!parsed.ok()) {
    Fail(std::string(parsed.status().message()));
    return 2;
  }
  if (parsed->help) {
    std::fputs(missile::cli::kRunUsage, stdout);
    return 0;
  }
  if (parsed->version) {
    std::printf("missile-run %s\n", missile::kVersion);
    return 0;
  }
  absl::StatusOr<std::string> shim =
      missile::cli::FindShim(parsed->shim, SelfExe(), std::getenv("MISSILE_SHIM"));
  if (!shim.ok()) {
    Fail(std::string(shim.status().message()));
    return 2;
  }
  const missile::cli::MpsState mps = missile::cli::DetectMps(
      std::getenv("CUDA_MPS_PIPE_DIRECTORY"), std::getenv("CUDA_MPS_CLIENT_PRIORITY"));
  for (const auto& [name, value] :
       missile::cli::BuildRunEnv(*parsed, *shim, std::getenv("LD_PRELOAD"), mps)) {
    if (setenv(name.c_str(), value.c_str(), 1) != 0) {
      Fail("cannot set " + name + ": " + std::strerror(errno));
      return 2;
    }
  }
  // argv is passed through untouched: the program's arguments begin where the parser stopped.
  char** program = argv + (argc - static_cast<int>(parsed->command.size()));
  execvp(program[0], program);
  int err = errno;
  Fail("cannot run " + parsed->command[0] + ": " + std::strerror(err));
  return 127;
}
