#include "real_driver.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/str_join.h"

namespace missile::shim {
namespace {

constexpr std::string_view kDriverName = "libcuda.so.1";

constexpr const char* kSystemDirs[] = {
    "/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/lib/x86_64-linux-gnu",
    "/usr/local/nvidia/lib64",   "/usr/local/nvidia/lib",  "/usr/lib/wsl/lib",
};

// Splits on `sep`, dropping empty pieces.
std::vector<std::string_view> Split(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  while (!text.empty()) {
    size_t end = text.find(sep);
    std::string_view part = text.substr(0, end);
    if (!part.empty()) parts.push_back(part);
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return parts;
}

// The cache is a table of NUL-terminated strings; rather than parse its two historical
// layouts, take every absolute path in it that ends in /libcuda.so.1.
void CachePaths(std::string_view cache, std::vector<std::string>* out) {
  const std::string suffix = "/" + std::string(kDriverName);
  for (std::string_view entry : Split(cache, '\0')) {
    if (entry.size() > suffix.size() && entry.front() == '/' &&
        entry.substr(entry.size() - suffix.size()) == suffix) {
      out->emplace_back(entry);
    }
  }
}

bool SameFile(const std::string& a, const std::string& b) {
  struct stat sa, sb;
  return stat(a.c_str(), &sa) == 0 && stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

}  // namespace

std::vector<std::string> DriverCandidates(const std::string& explicit_path,
                                          const char* ld_library_path,
                                          std::string_view ld_cache_contents) {
  if (!explicit_path.empty()) return {explicit_path};
  std::vector<std::string> ordered;
  if (ld_library_path != nullptr) {
    for (std::string_view dir : Split(ld_library_path, ':')) {
      ordered.push_back(std::string(dir) + "/" + std::string(kDriverName));
    }
  }
  for (const char* dir : kSystemDirs) {
    ordered.push_back(std::string(dir) + "/" + std::string(kDriverName));
  }
  CachePaths(ld_cache_contents, &ordered);
  std::vector<std::string> unique;
  std::set<std::string> seen;
  for (auto& path : ordered) {
    if (path.find("/stubs/") != std::string::npos) continue;  // the toolkit's link-time stub
    if (seen.insert(path).second) unique.push_back(std::move(path));
  }
  return unique;
}

absl::StatusOr<RealDriver> OpenRealDriver(const std::string& explicit_path, const void* self) {
  std::string self_path;
  Dl_info info;
  if (dladdr(self, &info) != 0 && info.dli_fname != nullptr) self_path = info.dli_fname;

  std::string cache;
  if (explicit_path.empty()) {
    std::ifstream in("/etc/ld.so.cache", std::ios::binary);
    cache.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  std::vector<std::string> tried;
  for (const std::string& path : DriverCandidates(explicit_path, getenv("LD_LIBRARY_PATH"), cache)) {
    struct stat st;
    if (stat(path.c_str(), &st) != 0) continue;
    if (!self_path.empty() && SameFile(path, self_path)) continue;
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* err = dlerror();
      tried.push_back(path + " (" + (err ? err : "dlopen failed") + ")");
      continue;
    }
    if (dlsym(handle, "cuGetProcAddress_v2") == nullptr && dlsym(handle, "cuInit") == nullptr) {
      tried.push_back(path + " (not a CUDA driver)");
      dlclose(handle);
      continue;
    }
    return RealDriver{handle, path};
  }
  if (tried.empty()) {
    return absl::NotFoundError(
        explicit_path.empty()
            ? "no libcuda.so.1 found (searched LD_LIBRARY_PATH, the system directories and "
              "/etc/ld.so.cache); set MISSILE_REAL_LIBCUDA to the driver's path"
            : "MISSILE_REAL_LIBCUDA=" + explicit_path + " does not exist");
  }
  return absl::NotFoundError("could not load the real CUDA driver: " + absl::StrJoin(tried, "; "));
}

}  // namespace missile::shim
