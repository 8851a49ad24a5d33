// Tells ThreadSanitizer about absl::Mutex in the TSan build (MISSILE_SANITIZE=thread).
//
// Debian's abseil is a prebuilt shared library without TSan instrumentation, so TSan sees none
// of absl::Mutex's locking and would report every access guarded by one as a race. This file,
// linked into every executable of the TSan build, defines the Mutex and CondVar entry points
// Missile calls: each calls the library's own (found with dlsym(RTLD_NEXT)) and adds the
// happens-before edges of the lock (acquire after locking, release before unlocking, both
// around a wait that unlocks for its duration). Races between our threads stay visible; only
// the lock is explained. Never part of an ordinary build.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/synchronization/mutex.h"

extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);

namespace {

#define MISSILE_STR2(x) #x
#define MISSILE_STR(x) MISSILE_STR2(x)

// The mangled name of absl::<cls>::<method>(<params>) as the library exports it.
std::string Mangled(const std::string& cls, const std::string& method, const std::string& params) {
  std::string name = "_ZN4absl";
#if ABSL_OPTION_USE_INLINE_NAMESPACE
  const std::string ns = MISSILE_STR(ABSL_OPTION_INLINE_NAMESPACE_NAME);
  name += std::to_string(ns.size()) + ns;
#endif
  return name + std::to_string(cls.size()) + cls + std::to_string(method.size()) + method + "E" +
         params;
}

template <typename F>
F Real(const std::string& cls, const std::string& method, const std::string& params) {
  const std::string name = Mangled(cls, method, params);
  void* f = dlsym(RTLD_NEXT, name.c_str());
  if (f == nullptr) {
    fprintf(stderr, "tsan_absl_mutex: %s not found\n", name.c_str());
    abort();
  }
  return reinterpret_cast<F>(f);
}

// The mangling of parameter type absl::<type>, after the function's own name has introduced the
// namespace (substitution S0_ with the inline namespace, S_ without).
std::string Param(const std::string& type) {
#if ABSL_OPTION_USE_INLINE_NAMESPACE
  return "NS0_" + std::to_string(type.size()) + type + "E";
#else
  return "NS_" + std::to_string(type.size()) + type + "E";
#endif
}

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

void Mutex::Lock() {
  static auto real = Real<void (*)(Mutex*)>("Mutex", "Lock", "v");
  real(this);
  __tsan_acquire(this);
}

void Mutex::Unlock() {
  static auto real = Real<void (*)(Mutex*)>("Mutex", "Unlock", "v");
  __tsan_release(this);
  real(this);
}

bool Mutex::TryLock() {
  static auto real = Real<bool (*)(Mutex*)>("Mutex", "TryLock", "v");
  const bool locked = real(this);
  if (locked) __tsan_acquire(this);
  return locked;
}

void Mutex::ReaderLock() {
  static auto real = Real<void (*)(Mutex*)>("Mutex", "ReaderLock", "v");
  real(this);
  __tsan_acquire(this);
}

void Mutex::ReaderUnlock() {
  static auto real = Real<void (*)(Mutex*)>("Mutex", "ReaderUnlock", "v");
  __tsan_release(this);
  real(this);
}

void Mutex::LockWhen(const Condition& cond) {
  static auto real =
      Real<void (*)(Mutex*, const Condition&)>("Mutex", "LockWhen", "RK" + Param("Condition"));
  real(this, cond);
  __tsan_acquire(this);
}

void Mutex::Await(const Condition& cond) {
  static auto real =
      Real<void (*)(Mutex*, const Condition&)>("Mutex", "Await", "RK" + Param("Condition"));
  __tsan_release(this);
  real(this, cond);
  __tsan_acquire(this);
}

bool Mutex::AwaitWithTimeout(const Condition& cond, absl::Duration timeout) {
  static auto real = Real<bool (*)(Mutex*, const Condition&, absl::Duration)>(
      "Mutex", "AwaitWithTimeout", "RK" + Param("Condition") + Param("Duration"));
  __tsan_release(this);
  const bool met = real(this, cond, timeout);
  __tsan_acquire(this);
  return met;
}

bool Mutex::LockWhenWithTimeout(const Condition& cond, absl::Duration timeout) {
  static auto real = Real<bool (*)(Mutex*, const Condition&, absl::Duration)>(
      "Mutex", "LockWhenWithTimeout", "RK" + Param("Condition") + Param("Duration"));
  const bool met = real(this, cond, timeout);
  __tsan_acquire(this);
  return met;
}

void CondVar::Wait(Mutex* mu) {
  static auto real = Real<void (*)(CondVar*, Mutex*)>("CondVar", "Wait", "P" + Param("Mutex"));
  __tsan_release(mu);
  real(this, mu);
  __tsan_acquire(mu);
}

bool CondVar::WaitWithTimeout(Mutex* mu, absl::Duration timeout) {
  static auto real = Real<bool (*)(CondVar*, Mutex*, absl::Duration)>(
      "CondVar", "WaitWithTimeout", "P" + Param("Mutex") + Param("Duration"));
  __tsan_release(mu);
  const bool timed_out = real(this, mu, timeout);
  __tsan_acquire(mu);
  return timed_out;
}

bool CondVar::WaitWithDeadline(Mutex* mu, absl::Time deadline) {
  static auto real = Real<bool (*)(CondVar*, Mutex*, absl::Time)>(
      "CondVar", "WaitWithDeadline", "P" + Param("Mutex") + Param("Time"));
  __tsan_release(mu);
  const bool timed_out = real(this, mu, deadline);
  __tsan_acquire(mu);
  return timed_out;
}

ABSL_NAMESPACE_END
}  // namespace absl
