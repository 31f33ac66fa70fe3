#define BOOST_TEST_MODULE merge_schema
#include <boost/test/unit_test.hpp>

#include <string>

#include "handlers/openapi.h"
#include "handlers/registry/registry.h"
#include "rapidjson/document.h"

// The OpenAPI document declares the merge rules the field manager follows: for
// every property of our kinds, the x-kubernetes-* extensions must say what
// each kind's Strategy::MergeSchema does (and every declared field must exist in it).
namespace poolcoord::handlers {
namespace {

using ssa::ListType;
using ssa::SchemaNode;

rapidjson::Document OpenApiV3() {
  Request r;
  r.method = "GET";
  r.path = "/openapi/v3/apis/coordination.pool/v1alpha1";
  r.headers.emplace_back("accept", "application/json");
  Response resp = ServeOpenApiV3GroupVersion(r);
  rapidjson::Document d;
  d.Parse(resp.body.c_str(), resp.body.size());
  BOOST_REQUIRE(!d.HasParseError());
  return d;
}

const rapidjson::Value& Definition(const rapidjson::Document& doc, std::string ref) {
  const std::string prefix = "#/components/schemas/";
  BOOST_REQUIRE(ref.rfind(prefix, 0) == 0);
  return doc["components"]["schemas"][ref.substr(prefix.size()).c_str()];
}

std::string RefOf(const rapidjson::Value& prop) {
  if (prop.HasMember("$ref")) return prop["$ref"].GetString();
  if (prop.HasMember("allOf")) return prop["allOf"][0]["$ref"].GetString();
  return "";
}

std::string Ext(const rapidjson::Value& v, const char* name, const char* otherwise) {
  return v.HasMember(name) ? v[name].GetString() : otherwise;
}

int checked = 0;

void Check(const rapidjson::Document& doc, const rapidjson::Value& def, const SchemaNode& node,
           const std::string& path) {
  BOOST_TEST_REQUIRE((node.kind == SchemaNode::Kind::kMap), path);
  BOOST_TEST((Ext(def, "x-kubernetes-map-type", "granular") == (node.atomic ? "atomic" : "granular")),
             path);
  if (!def.HasMember("properties")) return;
  for (const auto& m : def["properties"].GetObject()) {
    const std::string name = m.name.GetString();
    const std::string here = path + "." + name;
    const SchemaNode* field = node.FieldType(name);
    BOOST_TEST_REQUIRE(field != nullptr, here + " is in the OpenAPI document, not in the MergeSchema");
    ++checked;
    const rapidjson::Value& prop = m.value;
    const std::string ref = RefOf(prop);
    const std::string type = prop.HasMember("type") ? prop["type"].GetString() : "";
    if (type == "array") {
      BOOST_TEST_REQUIRE((field->kind == SchemaNode::Kind::kList), here);
      const std::string list_type = Ext(prop, "x-kubernetes-list-type", "atomic");
      const char* want = field->list_type == ListType::kSet   ? "set"
                         : field->list_type == ListType::kMap ? "map"
                                                              : "atomic";
      BOOST_TEST(list_type == want, here);
      if (field->list_type == ListType::kMap) {
        std::vector<std::string> keys;
        for (const auto& k : prop["x-kubernetes-list-map-keys"].GetArray()) keys.push_back(k.GetString());
        BOOST_TEST((keys == field->keys), here);
      }
      const rapidjson::Value& items = prop["items"];
      if (field->list_type != ListType::kAtomic && items.HasMember("$ref") &&
          field->elements->kind == SchemaNode::Kind::kMap) {
        Check(doc, Definition(doc, items["$ref"].GetString()), *field->elements, here + "[]");
      }
    } else if (type == "object" && prop.HasMember("additionalProperties")) {
      BOOST_TEST_REQUIRE((field->kind == SchemaNode::Kind::kMap), here);
      BOOST_TEST((Ext(prop, "x-kubernetes-map-type", "granular") == (field->atomic ? "atomic" : "granular")),
                 here);
    } else if (!ref.empty()) {
      const rapidjson::Value& target = Definition(doc, ref);
      if (std::string(target["type"].GetString()) == "object" && field->kind == SchemaNode::Kind::kMap) {
        Check(doc, target, *field, here);
      } else {
        BOOST_TEST((field->kind == SchemaNode::Kind::kScalar), here);
      }
    } else {
      BOOST_TEST((field->kind == SchemaNode::Kind::kScalar), here);
    }
  }
}

BOOST_AUTO_TEST_CASE(OpenApiExtensionsMatchTheMergeSchema) {
  const rapidjson::Document doc = OpenApiV3();
  int kinds = 0;
  for (const registry::Strategy* kind : registry::AllKinds()) {
    const std::string def = "pool.coordination.v1alpha1." + std::string(kind->Info().kind_name);
    BOOST_TEST_REQUIRE(doc["components"]["schemas"].HasMember(def.c_str()), def);
    const rapidjson::Value& d = doc["components"]["schemas"][def.c_str()];
    Check(doc, d, kind->MergeSchema().root(), "");
    // spec is required (the duration within it, by each kind's definition).
    BOOST_TEST(std::string(d["required"][0].GetString()) == "spec");
    ++kinds;
  }
  BOOST_TEST(kinds >= 2);
  BOOST_TEST(checked > 40);
}

BOOST_AUTO_TEST_CASE(DeclaredRulesOfObjectMeta) {
  const SchemaNode& meta = *registry::ForKind(store::Kind::kPoolLease).MergeSchema().root().FieldType("metadata");
  BOOST_TEST(!meta.FieldType("labels")->atomic);
  BOOST_TEST(!meta.FieldType("annotations")->atomic);
  BOOST_TEST((meta.FieldType("finalizers")->list_type == ListType::kSet));
  BOOST_TEST((meta.FieldType("ownerReferences")->list_type == ListType::kMap));
  BOOST_TEST(meta.FieldType("ownerReferences")->elements->atomic);
  BOOST_TEST((meta.FieldType("managedFields")->list_type == ListType::kAtomic));
}

}  // namespace
}  // namespace poolcoord::handlers
