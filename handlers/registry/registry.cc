#include "handlers/registry/registry.h"

#include <array>
#include <cstdlib>
#include <vector>

#include "base/log.h"

namespace poolcoord::handlers::registry {

// Each kind's file defines `const Strategy& <Plural>()`, its strategy. Adding a
// kind: its file, and one line here, in the order discovery and OpenAPI list
// them (kube-apiserver's storage map of a group, by resource).
#define POOLCOORD_KINDS(KIND) \
  KIND(PoolLeases)            \
  KIND(DelegatedLeases)       \
  /* (the end of the list) */

#define POOLCOORD_DECLARE_KIND(name) const Strategy& name();
POOLCOORD_KINDS(POOLCOORD_DECLARE_KIND)
#undef POOLCOORD_DECLARE_KIND

namespace {

struct Registry {
  std::vector<const Strategy*> kinds;
  std::array<const Strategy*, store::kMaxKinds> by_kind{};
};

const Registry& Get() {
  static const Registry* const registry = [] {
    auto* r = new Registry;
#define POOLCOORD_ADD_KIND(name) r->kinds.push_back(&name());
    POOLCOORD_KINDS(POOLCOORD_ADD_KIND)
#undef POOLCOORD_ADD_KIND
    for (const Strategy* s : r->kinds) {
      const store::ResourceInfo& info = s->Info();
      const auto index = static_cast<size_t>(info.kind);
      if (index >= r->by_kind.size() || r->by_kind[index] != nullptr ||
          !store::RegisterResource(&info)) {
        // Two kinds with one number or plural: a programming error, found at start-up.
        base::LogError("kind ", info.kind_name, " (", info.plural,
                       ") clashes with another kind's number or plural");
        std::abort();
      }
      r->by_kind[index] = s;
    }
    return r;
  }();
  return *registry;
}

}  // namespace

std::span<const Strategy* const> AllKinds() { return Get().kinds; }

const Strategy& ForKind(store::Kind kind) { return *Get().by_kind[static_cast<size_t>(kind)]; }

const Strategy* ForPlural(std::string_view plural) {
  for (const Strategy* s : Get().kinds) {
    if (plural == s->Info().plural) return s;
  }
  return nullptr;
}

}  // namespace poolcoord::handlers::registry
