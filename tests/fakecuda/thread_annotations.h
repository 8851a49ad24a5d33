// Lock annotations for the fake's sources, and the mutex types they apply to. The fake links only
// libc/libstdc++, so it cannot use absl/base/thread_annotations.h or absl::Mutex; these mirror
// their names. Like them, they are checked by clang's -Wthread-safety and expand to nothing under
// GCC. libstdc++'s std::mutex and std::shared_mutex carry no capability attributes, so members
// guarded by one of them would not be checked: the fake's state is guarded by the annotated
// wrappers below (Mutex, SharedMutex) and locked through their scoped types (MutexLock,
// WriterLock, ReaderLock), which lock and unlock exactly as the std types they wrap.

#ifndef MISSILE_TESTS_FAKECUDA_THREAD_ANNOTATIONS_H_
#define MISSILE_TESTS_FAKECUDA_THREAD_ANNOTATIONS_H_

#include <condition_variable>
#include <mutex>
#include <shared_mutex>

#if defined(__clang__)
#define FAKECUDA_THREAD_ANNOTATION_(x) __attribute__((x))
#else
#define FAKECUDA_THREAD_ANNOTATION_(x)
#endif

#define FAKECUDA_CAPABILITY(x) FAKECUDA_THREAD_ANNOTATION_(capability(x))
#define FAKECUDA_SCOPED_LOCKABLE FAKECUDA_THREAD_ANNOTATION_(scoped_lockable)
#define FAKECUDA_GUARDED_BY(x) FAKECUDA_THREAD_ANNOTATION_(guarded_by(x))
#define FAKECUDA_EXCLUSIVE_LOCKS_REQUIRED(...) \
  FAKECUDA_THREAD_ANNOTATION_(exclusive_locks_required(__VA_ARGS__))
#define FAKECUDA_SHARED_LOCKS_REQUIRED(...) \
  FAKECUDA_THREAD_ANNOTATION_(shared_locks_required(__VA_ARGS__))
#define FAKECUDA_LOCKS_EXCLUDED(...) FAKECUDA_THREAD_ANNOTATION_(locks_excluded(__VA_ARGS__))
#define FAKECUDA_EXCLUSIVE_LOCK_FUNCTION(...) \
  FAKECUDA_THREAD_ANNOTATION_(exclusive_lock_function(__VA_ARGS__))
#define FAKECUDA_SHARED_LOCK_FUNCTION(...) \
  FAKECUDA_THREAD_ANNOTATION_(shared_lock_function(__VA_ARGS__))
#define FAKECUDA_UNLOCK_FUNCTION(...) FAKECUDA_THREAD_ANNOTATION_(unlock_function(__VA_ARGS__))
#define FAKECUDA_NO_THREAD_SAFETY_ANALYSIS FAKECUDA_THREAD_ANNOTATION_(no_thread_safety_analysis)

namespace fakecuda {

// std::mutex as a capability the analysis knows.
class FAKECUDA_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() FAKECUDA_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() FAKECUDA_UNLOCK_FUNCTION() { mu_.unlock(); }

 private:
  friend class MutexLock;
  std::mutex mu_;
};

// Holds a Mutex for its scope (std::unique_lock underneath). Unlock()/Lock() drop and take it
// again within the scope; Wait() waits on a std::condition_variable, which releases the mutex
// while waiting and holds it again when it returns, as the analysis assumes throughout.
class FAKECUDA_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) FAKECUDA_EXCLUSIVE_LOCK_FUNCTION(mu) : lock_(mu->mu_) {}
  ~MutexLock() FAKECUDA_UNLOCK_FUNCTION() = default;
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void Unlock() FAKECUDA_UNLOCK_FUNCTION() { lock_.unlock(); }
  void Lock() FAKECUDA_EXCLUSIVE_LOCK_FUNCTION() { lock_.lock(); }

  // cv.wait(lock, pred). The predicate runs with the mutex held; a lambda that reads guarded
  // members says so with FAKECUDA_EXCLUSIVE_LOCKS_REQUIRED.
  template <typename Predicate>
  void Wait(std::condition_variable& cv, Predicate pred) {
    cv.wait(lock_, pred);
  }

 private:
  std::unique_lock<std::mutex> lock_;
};

// std::shared_mutex as a capability the analysis knows: exclusive for writers, shared for readers.
class FAKECUDA_CAPABILITY("shared_mutex") SharedMutex {
 public:
  SharedMutex() = default;
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;

  void Lock() FAKECUDA_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() FAKECUDA_UNLOCK_FUNCTION() { mu_.unlock(); }
  void LockShared() FAKECUDA_SHARED_LOCK_FUNCTION() { mu_.lock_shared(); }
  void UnlockShared() FAKECUDA_UNLOCK_FUNCTION() { mu_.unlock_shared(); }

 private:
  std::shared_mutex mu_;
};

// Holds a SharedMutex exclusively for its scope (as std::unique_lock / std::lock_guard).
class FAKECUDA_SCOPED_LOCKABLE WriterLock {
 public:
  explicit WriterLock(SharedMutex* mu) FAKECUDA_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_->Lock();
  }
  ~WriterLock() FAKECUDA_UNLOCK_FUNCTION() { mu_->Unlock(); }
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;

 private:
  SharedMutex* const mu_;
};

// Holds a SharedMutex shared for its scope (as std::shared_lock).
class FAKECUDA_SCOPED_LOCKABLE ReaderLock {
 public:
  explicit ReaderLock(SharedMutex* mu) FAKECUDA_SHARED_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_->LockShared();
  }
  ~ReaderLock() FAKECUDA_UNLOCK_FUNCTION() { mu_->UnlockShared(); }
  ReaderLock(const ReaderLock&) = delete;
  ReaderLock& operator=(const ReaderLock&) = delete;

 private:
  SharedMutex* const mu_;
};

}  // namespace fakecuda

#endif  // MISSILE_TESTS_FAKECUDA_THREAD_ANNOTATIONS_H_
