// Lock annotations for the fake's sources. The fake links only libc/libstdc++, so it cannot use
// absl/base/thread_annotations.h; these mirror its names and, like it, are checked by clang's
// -Wthread-safety and expand to nothing under GCC.

#ifndef MISSILE_TESTS_FAKECUDA_THREAD_ANNOTATIONS_H_
#define MISSILE_TESTS_FAKECUDA_THREAD_ANNOTATIONS_H_

#if defined(__clang__)
#define FAKECUDA_GUARDED_BY(x) __attribute__((guarded_by(x)))
#define FAKECUDA_EXCLUSIVE_LOCKS_REQUIRED(...) \
  __attribute__((exclusive_locks_required(__VA_ARGS__)))
#define FAKECUDA_LOCKS_EXCLUDED(...) __attribute__((locks_excluded(__VA_ARGS__)))
#else
#define FAKECUDA_GUARDED_BY(x)
#define FAKECUDA_EXCLUSIVE_LOCKS_REQUIRED(...)
#define FAKECUDA_LOCKS_EXCLUDED(...)
#endif

#endif  // MISSILE_TESTS_FAKECUDA_THREAD_ANNOTATIONS_H_
