# Sanitizer and fuzzing builds (docs/testing.md).
#
#   MISSILE_SANITIZE=address  AddressSanitizer + UndefinedBehaviorSanitizer over every target
#   MISSILE_SANITIZE=thread   ThreadSanitizer over every target
#   MISSILE_FUZZ=ON           the libFuzzer targets of tests/fuzz (clang only); every target
#                             is built with ASan + UBSan and coverage instrumentation, so
#                             scripts/fuzz.sh runs unit tests of this build under ASan + UBSan too
#
# The flags go on every target (compile and link), so the shim, the driver test double and the
# daemon are instrumented alike and the multi-process tests run sanitized end to end.
set(MISSILE_SANITIZE "" CACHE STRING "Sanitizer build: empty, address (ASan+UBSan) or thread (TSan)")
set_property(CACHE MISSILE_SANITIZE PROPERTY STRINGS "" address thread)
option(MISSILE_FUZZ "Build the libFuzzer targets in tests/fuzz (requires clang)" OFF)

set(missile_sanitizer_flags "")
if(MISSILE_SANITIZE STREQUAL "address")
  # UBSan findings stop the program, like ASan's: a test must not pass over undefined behaviour.
  list(APPEND missile_sanitizer_flags -fsanitize=address,undefined -fno-sanitize-recover=all)
elseif(MISSILE_SANITIZE STREQUAL "thread")
  list(APPEND missile_sanitizer_flags -fsanitize=thread)
elseif(NOT MISSILE_SANITIZE STREQUAL "")
  message(FATAL_ERROR "MISSILE_SANITIZE must be empty, address or thread, not '${MISSILE_SANITIZE}'")
endif()

if(MISSILE_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "MISSILE_FUZZ=ON needs clang (libFuzzer): configure with CXX=clang++ CC=clang")
  endif()
  if(NOT MISSILE_SANITIZE STREQUAL "")
    message(FATAL_ERROR "MISSILE_FUZZ=ON brings its own sanitizers: leave MISSILE_SANITIZE empty")
  endif()
  # Coverage instrumentation everywhere; the fuzz executables add -fsanitize=fuzzer (the driver
  # with its main) at link time, in tests/fuzz.
  list(APPEND missile_sanitizer_flags -fsanitize=fuzzer-no-link,address,undefined
       -fno-sanitize-recover=all)
endif()

if(missile_sanitizer_flags)
  list(APPEND missile_sanitizer_flags -fno-omit-frame-pointer)
  add_compile_options(${missile_sanitizer_flags})
  add_link_options(${missile_sanitizer_flags})
  message(STATUS "Missile sanitizer flags: ${missile_sanitizer_flags}")
endif()

# Debian's abseil is not instrumented for TSan: every target links (first, so that it comes
# before abseil in the search order) the library that tells TSan about absl::Mutex
# (tests/sanitizers/tsan_absl_mutex.cc).
if(MISSILE_SANITIZE STREQUAL "thread")
  add_library(missile_tsan_absl SHARED "${CMAKE_CURRENT_LIST_DIR}/../tests/sanitizers/tsan_absl_mutex.cc")
  target_link_libraries(missile_tsan_absl PRIVATE ${CMAKE_DL_LIBS})
  link_libraries(missile_tsan_absl)
endif()
