// Propagating an absl::Status without the `if (!s.ok()) return s;` boilerplate.
//
//   MISSILE_RETURN_IF_ERROR(WriteHeader(fd));
//   MISSILE_ASSIGN_OR_RETURN(uint64_t bytes, ParseSize(text));
//   MISSILE_ASSIGN_OR_RETURN(config.quota, ParseSize(text));
//
// MISSILE_RETURN_IF_ERROR(expr): `expr` yields an absl::Status; when it is not OK, the enclosing
// function returns it unchanged. MISSILE_ASSIGN_OR_RETURN(lhs, expr): `expr` yields an
// absl::StatusOr<T>; when it is not OK the enclosing function returns its status unchanged,
// else its value is moved into `lhs` (a declaration or an assignable expression). The enclosing
// function may return absl::Status or any absl::StatusOr. Each expression is evaluated once.
// Plain statements (no GNU statement expressions), so they compile with -Wpedantic. The second
// expands to more than one statement: use it in a block, never as the body of a bare `if`. A
// type with a comma in `lhs` ("std::pair<int, int> p") needs an alias, as in any macro argument.
// The temporary's name carries __LINE__: one MISSILE_ASSIGN_OR_RETURN per line.
#ifndef MISSILE_COMMON_STATUS_MACROS_H_
#define MISSILE_COMMON_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define MISSILE_RETURN_IF_ERROR(expr)                                            \
  do {                                                                           \
    ::absl::Status missile_status_macro_status_ = (expr);                        \
    if (!missile_status_macro_status_.ok()) return missile_status_macro_status_; \
  } while (false)

#define MISSILE_ASSIGN_OR_RETURN(lhs, expr)     \
  MISSILE_STATUS_MACROS_ASSIGN_OR_RETURN_IMPL_( \
      MISSILE_STATUS_MACROS_CONCAT_(missile_status_or_, __LINE__), lhs, expr)

// Implementation details.
#define MISSILE_STATUS_MACROS_CONCAT_INNER_(a, b) a##b
#define MISSILE_STATUS_MACROS_CONCAT_(a, b) MISSILE_STATUS_MACROS_CONCAT_INNER_(a, b)
#define MISSILE_STATUS_MACROS_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                                 \
  if (!statusor.ok()) return std::move(statusor).status();                \
  lhs = *std::move(statusor)

#endif  // MISSILE_COMMON_STATUS_MACROS_H_
