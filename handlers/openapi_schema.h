// The pieces an OpenAPI schema is written with: a definition (an object type
// with described properties) and its properties. Each kind's strategy states its
// own definitions with them (handlers/registry/<kind>.cc); openapi.cc renders
// them, with the meta.k8s.io definitions, into Swagger 2.0 and OpenAPI 3.0
// documents (a $ref becomes #/definitions/... or #/components/schemas/...).
//
// Definition names follow kube-apiserver's: io.k8s.apimachinery.pkg.apis.meta.v1.<Type>
// for meta types (Meta), and for ours the group reversed, then version and type,
// as kube-apiserver names the schemas of a CustomResourceDefinition (Ours:
// pool.coordination.v1alpha1.<Type>).
//
// Plain values; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace poolcoord::handlers::openapi {

enum class Type { kString, kInt32, kInt64, kBool, kRef, kArrayString, kArrayRef, kMapString, kObject };

struct Prop {
  std::string name;
  Type type;
  std::string description;
  std::string ref = {};  // the full definition name, for kRef and kArrayRef
  // Server-side apply's merge rules, as the x-kubernetes-* extensions say them:
  // x-kubernetes-map-type ("granular", "atomic") of a map, x-kubernetes-list-type
  // ("atomic", "set", "map") and x-kubernetes-list-map-keys of a list. The
  // field manager follows the same rules (Strategy::MergeSchema).
  std::string map_type = {};
  std::string list_type = {};
  std::vector<std::string> list_map_keys = {};
};

struct Definition {
  std::string name;  // the full definition name
  std::string description;
  std::string type = "object";
  std::string format;  // for string-typed definitions (Time, MicroTime)
  std::vector<Prop> props;
  std::vector<std::string> required;
  std::string gvk_kind;  // non-empty for our kinds and lists: x-kubernetes-group-version-kind
  std::string map_type = {};  // x-kubernetes-map-type of an object type
};

std::string Meta(std::string_view type);  // "io.k8s.apimachinery.pkg.apis.meta.v1." + type
std::string Ours(std::string_view type);  // "pool.coordination.v1alpha1." + type

inline Prop StringProp(std::string name, std::string doc) {
  return {std::move(name), Type::kString, std::move(doc), ""};
}
inline Prop Int32Prop(std::string name, std::string doc) {
  return {std::move(name), Type::kInt32, std::move(doc), ""};
}
inline Prop Int64Prop(std::string name, std::string doc) {
  return {std::move(name), Type::kInt64, std::move(doc), ""};
}
inline Prop BoolProp(std::string name, std::string doc) {
  return {std::move(name), Type::kBool, std::move(doc), ""};
}
// A property of a defined type: `ref` is a full definition name.
inline Prop RefProp(std::string name, std::string ref, std::string doc) {
  return {std::move(name), Type::kRef, std::move(doc), std::move(ref)};
}
inline Prop ArrayRefProp(std::string name, std::string ref, std::string doc) {
  return {std::move(name), Type::kArrayRef, std::move(doc), std::move(ref)};
}
inline Prop StringArrayProp(std::string name, std::string doc) {
  return {std::move(name), Type::kArrayString, std::move(doc), ""};
}
// A map[string]string, merged key by key (x-kubernetes-map-type: granular).
inline Prop StringMapProp(std::string name, std::string doc) {
  Prop p{std::move(name), Type::kMapString, std::move(doc), ""};
  p.map_type = "granular";
  return p;
}
// `p` with x-kubernetes-list-type (and, for "map", x-kubernetes-list-map-keys).
inline Prop WithListType(Prop p, std::string list_type, std::vector<std::string> keys = {}) {
  p.list_type = std::move(list_type);
  p.list_map_keys = std::move(keys);
  return p;
}
inline Prop ObjectProp(std::string name, std::string doc) {
  return {std::move(name), Type::kObject, std::move(doc), ""};
}

// The definition of kind `kind` itself: apiVersion, kind, metadata, and spec and
// status of the types <kind>Spec and <kind>Status, with the docs given.
Definition KindDefinition(std::string_view kind, std::string description,
                          std::string metadata_doc, std::string spec_doc,
                          std::string status_doc);

// The descriptions of apiVersion and kind on every object of ours.
inline constexpr char kApiVersionDoc[] =
    "APIVersion defines the versioned schema of this representation of an object: "
    "coordination.pool/v1alpha1 for our kinds.";
inline constexpr char kKindDoc[] =
    "Kind is a string value representing the REST resource this object represents, in "
    "CamelCase.";

}  // namespace poolcoord::handlers::openapi
