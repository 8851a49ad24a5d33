#include "missile/common/copy_channel.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <climits>

namespace missile::copych {

void FutexWait(std::atomic<uint32_t>* word, uint32_t expected, uint64_t timeout_us) {
  timespec ts{static_cast<time_t>(timeout_us / 1000000),
              static_cast<long>((timeout_us % 1000000) * 1000)};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected,
          timeout_us == 0 ? nullptr : &ts, nullptr, 0);
}

void FutexWakeAll(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

}  // namespace missile::copych
