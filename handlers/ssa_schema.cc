#include "handlers/ssa_schema.h"

namespace poolcoord::handlers::ssa {

const SchemaNode* SchemaNode::FieldType(std::string_view name) const {
  for (const auto& [field, type] : fields) {
    if (field == name) return type;
  }
  return elements;
}

bool SchemaNode::IsNamedField(std::string_view name) const {
  for (const auto& f : fields) {
    if (f.first == name) return true;
  }
  return false;
}

const SchemaNode* Schema::Scalar(ScalarType type) {
  SchemaNode& n = nodes_.emplace_back();
  n.kind = SchemaNode::Kind::kScalar;
  n.scalar = type;
  return &n;
}

const SchemaNode* Schema::Struct(std::vector<std::pair<std::string, const SchemaNode*>> fields,
                                 bool atomic) {
  SchemaNode& n = nodes_.emplace_back();
  n.kind = SchemaNode::Kind::kMap;
  n.fields = std::move(fields);
  n.atomic = atomic;
  return &n;
}

const SchemaNode* Schema::Map(const SchemaNode* elements, bool atomic) {
  SchemaNode& n = nodes_.emplace_back();
  n.kind = SchemaNode::Kind::kMap;
  n.elements = elements;
  n.atomic = atomic;
  return &n;
}

const SchemaNode* Schema::List(const SchemaNode* items, ListType type,
                               std::vector<std::string> keys) {
  SchemaNode& n = nodes_.emplace_back();
  n.kind = SchemaNode::Kind::kList;
  n.elements = items;
  n.list_type = type;
  n.keys = std::move(keys);
  return &n;
}

}  // namespace poolcoord::handlers::ssa
