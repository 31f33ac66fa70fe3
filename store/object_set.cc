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

ListResult ListObjects(const ObjectSet& objects, const ListOptions& options, int64_t revision) {
  ListResult result;
  result.revision = revision;
  auto it = options.after_name.empty() ? objects.begin()
                                       : objects.upper_bound(std::string_view(options.after_name));
  for (; it != objects.end(); ++it) {
    if (options.predicate && !options.predicate(**it)) continue;
    if (options.limit > 0 && static_cast<int64_t>(result.items.size()) >= options.limit) {
      if (result.next_name.empty()) result.next_name = (*it)->metadata.name;
      ++result.remaining;
      continue;
    }
    result.items.push_back(*it);
  }
  return result;
}

}  // namespace poolcoord::store
