#include "store/object.h"

namespace poolcoord::store {
namespace {
constexpr ResourceInfo kInfos[] = {
    {Kind::kPoolLease, "poolleases", "poollease", "PoolLease", "pl"},
    {Kind::kDelegatedLease, "delegatedleases", "delegatedlease", "DelegatedLease", "dl"},
};
}  // namespace

const ResourceInfo& InfoFor(Kind kind) { return kInfos[static_cast<int>(kind)]; }

const ResourceInfo* InfoForPlural(std::string_view plural) {
  for (const auto& info : kInfos) {
    if (plural == info.plural) return &info;
  }
  return nullptr;
}

}  // namespace poolcoord::store
