// Objects and update functions the store tests write with (memory store,
// watch cache): a lease of a kind, "create or set spec.leaseDurationSeconds",
// "delete".
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "store/store.h"

namespace poolcoord::store::test_util {

inline MutableObjectPtr NewLease(Kind kind, int32_t duration = 10) {
  auto o = std::make_shared<Object>();
  o->kind = kind;
  o->spec.lease_duration_seconds = duration;
  return o;
}

// Creates the object when absent, otherwise sets its duration.
inline UpdateFn Put(Kind kind, int32_t duration) {
  return [kind, duration](const ObjectPtr& cur, TxnReader&) -> absl::StatusOr<MutableObjectPtr> {
    auto next = cur ? std::make_shared<Object>(*cur) : NewLease(kind);
    next->spec.lease_duration_seconds = duration;
    return next;
  };
}

inline UpdateFn Remove() {
  return [](const ObjectPtr&, TxnReader&) -> absl::StatusOr<MutableObjectPtr> { return nullptr; };
}

}  // namespace poolcoord::store::test_util
