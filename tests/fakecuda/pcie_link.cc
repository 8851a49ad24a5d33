#include "pcie_link.h"

#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cmath>

namespace fakecuda {

uint64_t MonotonicNowNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

void SleepUntilNs(uint64_t deadline_ns) {
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(deadline_ns / 1000000000ull);
  ts.tv_nsec = static_cast<long>(deadline_ns % 1000000000ull);
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

PcieLink::PcieLink(SharedState* shared, double bytes_per_us)
    : shared_(shared), bytes_per_us_(bytes_per_us) {}

void PcieLink::Transfer(int device, Direction direction, uint64_t bytes,
                        const std::function<void()>& copy) const {
  if (bytes_per_us_ <= 0 || bytes == 0) {
    copy();
    return;
  }
  const auto duration =
      static_cast<uint64_t>(std::ceil(static_cast<double>(bytes) * 1000.0 / bytes_per_us_));
  std::atomic_ref<uint64_t> busy = shared_->LinkBusyUntil(device, static_cast<int>(direction));
  const uint64_t now = MonotonicNowNs();
  uint64_t old = busy.load();
  uint64_t start = 0;
  uint64_t end = 0;
  do {
    start = std::max(now, old);
    end = start + duration;
  } while (!busy.compare_exchange_weak(old, end));
  SleepUntilNs(start);
  copy();
  SleepUntilNs(end);
}

uint64_t PcieLink::BusyUntilNs(int device, Direction direction) const {
  return shared_->LinkBusyUntil(device, static_cast<int>(direction)).load();
}

}  // namespace fakecuda
