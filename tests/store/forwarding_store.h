// A Store that passes every call to a store it does not own: tests derive from
// it and override the calls they count, fail or answer themselves.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "store/store.h"

namespace poolcoord::testing {

class ForwardingStore : public store::Store {
 public:
  explicit ForwardingStore(store::Store* below) : below_(below) {}

  absl::StatusOr<store::ObjectPtr> Get(store::Kind kind, std::string_view name) override {
    return below_->Get(kind, name);
  }
  absl::StatusOr<store::ObjectPtr> GetWithFreshness(store::Kind kind, std::string_view name,
                                                    const store::Freshness& freshness) override {
    return below_->GetWithFreshness(kind, name, freshness);
  }
  absl::StatusOr<std::vector<store::ObjectPtr>> GetAll(
      std::span<const store::ObjectKey> keys) override {
    return below_->GetAll(keys);
  }
  absl::StatusOr<store::ListResult> List(store::Kind kind,
                                         const store::ListOptions& options) override {
    return below_->List(kind, options);
  }
  absl::StatusOr<store::WriteResult> Update(store::Kind kind, std::string_view name,
                                            const store::UpdateFn& fn, bool dry_run) override {
    return below_->Update(kind, name, fn, dry_run);
  }
  absl::StatusOr<std::unique_ptr<store::Watcher>> Watch(store::Kind kind, int64_t from) override {
    return below_->Watch(kind, from);
  }
  int64_t CurrentRevision() override { return below_->CurrentRevision(); }
  int64_t OldestWatchableRevision() override { return below_->OldestWatchableRevision(); }
  // The store below belongs to the test.
  void Shutdown() override {}

 protected:
  store::Store* const below_;
};

}  // namespace poolcoord::testing
