#include "shared_state.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

namespace fakecuda {
namespace {

constexpr uint64_t kMagic = 0x41445543454b4146ull;  // "FAKECUDA" in memory order
// 2: the compute engines. 3: their time-slice state.
constexpr uint32_t kVersion = 3;

struct alignas(64) ShmLink {
  uint64_t busy_until_ns;
};
struct alignas(64) ShmCursor {
  uint64_t next;
};

struct ShmHeader {
  // Constant after creation.
  uint64_t magic;
  uint32_t version;
  uint32_t max_devices;
  uint64_t total_mem;
  uint64_t frames_per_device;
  uint64_t shuffle;  // 1 when frames are handed out in a seeded random order
  uint64_t shuffle_seed;
  uint64_t file_size;
  // Atomic from here on.
  ShmLink links[kMaxDevices][2];
  ShmCursor cursors[kMaxDevices];
  EngineSlice engines[kMaxDevices];  // each device's compute engine (engine.h)
};

constexpr size_t kFramesOffset = (sizeof(ShmHeader) + 4095) / 4096 * 4096;

size_t FileSize(uint64_t frames_per_device) {
  return kFramesOffset + sizeof(ShmFrame) * kMaxDevices * frames_per_device;
}

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

// Creates a fully initialised state file under a temporary name and links it to `path`.
// Returns false with *error set on failure; true also when another process won the race.
bool CreateFile(const std::string& path, const Config& config, std::string* error) {
  std::random_device rd;
  const std::string tmp = path + ".tmp." + std::to_string(getpid()) + "." + std::to_string(rd());
  const int fd = open(tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    *error = Errno("fakecuda: cannot create " + tmp);
    return false;
  }
  const uint64_t frames = config.total_mem / kGranularity;
  const size_t size = FileSize(frames);
  bool ok = ftruncate(fd, static_cast<off_t>(size)) == 0;
  if (ok) {
    ShmHeader header{};
    header.magic = kMagic;
    header.version = kVersion;
    header.max_devices = kMaxDevices;
    header.total_mem = config.total_mem;
    header.frames_per_device = frames;
    header.shuffle = config.phys_shuffle ? 1 : 0;
    header.shuffle_seed = config.shuffle_seed;
    header.file_size = size;
    ok = pwrite(fd, &header, sizeof(header), 0) == static_cast<ssize_t>(sizeof(header));
  }
  if (!ok) *error = Errno("fakecuda: cannot initialise " + tmp);
  close(fd);
  if (ok && link(tmp.c_str(), path.c_str()) != 0 && errno != EEXIST) {
    *error = Errno("fakecuda: cannot link " + path);
    ok = false;
  }
  unlink(tmp.c_str());
  return ok;
}

}  // namespace

std::unique_ptr<SharedState> SharedState::Open(const Config& config, std::string* error) {
  const std::string path = "/dev/shm" + config.shm_name;
  int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) {
    if (!CreateFile(path, config, error)) return nullptr;
    fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  }
  if (fd < 0) {
    *error = Errno("fakecuda: cannot open " + path);
    return nullptr;
  }
  ShmHeader header{};
  struct stat st {};
  if (fstat(fd, &st) != 0 || pread(fd, &header, sizeof(header), 0) != sizeof(header) ||
      header.magic != kMagic || header.version != kVersion || header.max_devices != kMaxDevices ||
      header.file_size != FileSize(header.frames_per_device) ||
      static_cast<uint64_t>(st.st_size) < header.file_size) {
    close(fd);
    *error = "fakecuda: " + path + " is not a fakecuda v" + std::to_string(kVersion) +
             " state file; remove it or set FAKECUDA_SHM to another name";
    return nullptr;
  }
  if (header.total_mem != config.total_mem || (header.shuffle != 0) != config.phys_shuffle ||
      (config.phys_shuffle && header.shuffle_seed != config.shuffle_seed)) {
    close(fd);
    *error = "fakecuda: " + path + " was made for another configuration (total memory " +
             std::to_string(header.total_mem) + " bytes, shuffle " +
             (header.shuffle ? std::to_string(header.shuffle_seed) : std::string("off")) +
             ") than this process's (" + std::to_string(config.total_mem) + " bytes, shuffle " +
             (config.phys_shuffle ? std::to_string(config.shuffle_seed) : std::string("off")) +
             "); processes sharing FAKECUDA_SHM must agree, or use another FAKECUDA_SHM";
    return nullptr;
  }
  void* base = mmap(nullptr, header.file_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) {
    *error = Errno("fakecuda: cannot map " + path);
    return nullptr;
  }
  return std::unique_ptr<SharedState>(
      new SharedState(base, header.file_size, header.frames_per_device));
}

SharedState::SharedState(void* base, size_t size, uint64_t frames_per_device)
    : base_(base), size_(size), frames_per_device_(frames_per_device) {}

SharedState::~SharedState() { munmap(base_, size_); }

std::atomic_ref<uint64_t> SharedState::LinkBusyUntil(int device, int direction) const {
  auto* header = static_cast<ShmHeader*>(base_);
  return std::atomic_ref<uint64_t>(header->links[device][direction].busy_until_ns);
}

std::atomic_ref<uint64_t> SharedState::EngineBusyUntil(int device) const {
  auto* header = static_cast<ShmHeader*>(base_);
  return std::atomic_ref<uint64_t>(header->engines[device].busy_until_ns);
}

EngineSlice* SharedState::Engine(int device) const {
  return &static_cast<ShmHeader*>(base_)->engines[device];
}

std::atomic_ref<uint64_t> SharedState::Cursor(int device) const {
  auto* header = static_cast<ShmHeader*>(base_);
  return std::atomic_ref<uint64_t>(header->cursors[device].next);
}

ShmFrame* SharedState::Frame(int device, uint64_t index) const {
  auto* frames = reinterpret_cast<ShmFrame*>(static_cast<char*>(base_) + kFramesOffset);
  return &frames[static_cast<uint64_t>(device) * frames_per_device_ + index];
}

static_assert(std::atomic_ref<uint64_t>::is_always_lock_free,
              "the shared state needs lock-free 64-bit atomics");
static_assert(sizeof(ShmFrame) == 64);

}  // namespace fakecuda
