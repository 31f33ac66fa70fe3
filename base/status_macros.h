// Early-return helpers for absl::Status / absl::StatusOr<T>. Abseil's LTS
// 20220623 (Debian 12) ships none, so these follow the shape the later
// absl/status/status_macros.h and Google's internal macros give them:
//
//   RETURN_IF_ERROR(store->Delete(kind, name));
//   ASSIGN_OR_RETURN(Lease lease, leases->Get(name));
//   ASSIGN_OR_RETURN(auto doc, ParseObject(body));
//
// Both work in any function that returns absl::Status or absl::StatusOr<U>
// (a StatusOr is constructible from a non-OK Status). The expression is
// evaluated exactly once. Header-only; no state.
#pragma once

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define POOLCOORD_STATUS_CONCAT_INNER_(a, b) a##b
#define POOLCOORD_STATUS_CONCAT_(a, b) POOLCOORD_STATUS_CONCAT_INNER_(a, b)

// Returns the Status of `expr` from the enclosing function when it is not OK.
#define RETURN_IF_ERROR(expr)                                              \
  do {                                                                     \
    if (::absl::Status poolcoord_status_ = (expr); !poolcoord_status_.ok()) \
      return poolcoord_status_;                                            \
  } while (false)

// `lhs` is a declaration or an assignable expression; `rexpr` yields a
// StatusOr. On error, returns its Status; else moves the value into `lhs`.
#define ASSIGN_OR_RETURN(lhs, rexpr) \
  POOLCOORD_ASSIGN_OR_RETURN_IMPL_(POOLCOORD_STATUS_CONCAT_(poolcoord_statusor_, __LINE__), lhs, rexpr)

#define POOLCOORD_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                                     \
  if (!statusor.ok()) return std::move(statusor).status();     \
  lhs = *std::move(statusor)
