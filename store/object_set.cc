#include "store/object_set.h"

#include <utility>

namespace poolcoord::store {

ObjectPtr FindObject(const ObjectSet& objects, std::string_view name) {
  auto it = objects.find(name);
  return it == objects.end() ? nullptr : *it;
}

void UpsertObject(ObjectSet& objects, ObjectPtr object) {
  auto it = objects.find(std::string_view(object->metadata.name));
  if (it == objects.end()) {
    objects.insert(std::move(object));
    return;
  }
  // Same name, so the set's order holds; the element is not a const object,
  // only the set's iterators are const.
  const_cast<ObjectPtr&>(*it) = std::move(object);
}

ListResult ListObjects(const ObjectSet& objects, const ListOptions& options, int64_t revision,
                       const ObjectOverlay* overlay) {
  ListResult result;
  result.revision = revision;
  const std::string_view after = options.after_name;
  auto it = after.empty() ? objects.begin() : objects.upper_bound(after);
  static const ObjectOverlay kNoOverlay;
  const ObjectOverlay& over = overlay ? *overlay : kNoOverlay;
  auto ot = after.empty() ? over.begin() : over.upper_bound(after);
  // Two name-ordered runs merged; where both hold a name, the overlay's state wins.
  while (it != objects.end() || ot != over.end()) {
    ObjectPtr candidate;
    if (ot == over.end() || (it != objects.end() && (*it)->metadata.name < ot->first)) {
      candidate = *it++;
    } else {
      if (it != objects.end() && (*it)->metadata.name == ot->first) ++it;
      candidate = (ot++)->second;
      if (!candidate) continue;  // absent at that revision
    }
    if (options.predicate && !options.predicate(*candidate)) continue;
    if (options.limit > 0 && static_cast<int64_t>(result.items.size()) >= options.limit) {
      if (result.next_name.empty()) result.next_name = candidate->metadata.name;
      ++result.remaining;
      continue;
    }
    result.items.push_back(std::move(candidate));
  }
  return result;
}

}  // namespace poolcoord::store
