// The list of kinds (handlers/registry/registry.h), and that each kind's file
// agrees with itself and with the store's row: the spec fields its OpenAPI
// schema describes are those the codec reads and writes, every printer column
// gets a cell, every selectable field is accepted by the field selector parser.
#define BOOST_TEST_MODULE registry
#include <boost/test/unit_test.hpp>

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "handlers/list_options.h"
#include "handlers/openapi_schema.h"
#include "handlers/registry/registry.h"
#include "handlers/table.h"
#include "rapidjson/document.h"
#include "store/object.h"

namespace ph = poolcoord::handlers;
namespace ps = poolcoord::store;
namespace reg = poolcoord::handlers::registry;

namespace {

// The JSON names of the SpecField bits.
const std::pair<const char*, uint32_t> kSpecFields[] = {
    {"holderIdentity", poolcoord::api::kSpecHolderIdentity}, {"leaseDurationSeconds", poolcoord::api::kSpecLeaseDurationSeconds},
    {"acquireTime", poolcoord::api::kSpecAcquireTime},       {"renewTime", poolcoord::api::kSpecRenewTime},
    {"leaseTransitions", poolcoord::api::kSpecLeaseTransitions}, {"poolName", poolcoord::api::kSpecPoolName},
    {"delegate", poolcoord::api::kSpecDelegate}, {"proof", poolcoord::api::kSpecProof}};

// An object of `kind` with every spec field set.
ps::ObjectPtr Full(ps::Kind kind) {
  auto o = std::make_shared<ps::Object>();
  o->kind = kind;
  o->metadata.name = "n";
  o->metadata.creation_timestamp = 1'767'225'600;
  o->spec = {"h", 15, 1'767'225'600'000'000, 1'767'225'600'000'000, 2, "p", "d"};
  return o;
}

}  // namespace

BOOST_AUTO_TEST_CASE(kinds_in_discovery_order_and_found_by_plural_and_kind) {
  auto kinds = reg::AllKinds();
  BOOST_REQUIRE(kinds.size() >= 2u);
  BOOST_TEST(std::string(kinds[0]->Info().plural) == "poolleases");
  BOOST_TEST(std::string(kinds[1]->Info().plural) == "delegatedleases");
  for (const reg::Strategy* kind : kinds) {
    BOOST_TEST(reg::ForPlural(kind->Info().plural) == kind);
    BOOST_TEST(&reg::ForKind(kind->kind()) == kind);
    BOOST_TEST(&ps::InfoFor(kind->kind()) == &kind->Info());
    BOOST_TEST(!kind->NamespaceScoped());
  }
  BOOST_TEST(reg::ForPlural("leases") == nullptr);
  BOOST_TEST(reg::ForPlural("") == nullptr);
}

BOOST_AUTO_TEST_CASE(schema_spec_properties_are_the_wire_fields) {
  for (const reg::Strategy* kind : reg::AllKinds()) {
    const std::string kind_name = kind->Info().kind_name;
    BOOST_TEST_CONTEXT(kind_name) {
      // The spec type is the one the kind's "spec" property refers to.
      const auto defs = kind->Definitions();
      std::string spec_ref;
      for (const auto& d : defs) {
        if (d.name != ph::openapi::Ours(kind_name)) continue;
        BOOST_TEST(d.gvk_kind == kind_name);
        for (const auto& p : d.props) {
          if (p.name == "spec") spec_ref = p.ref;
        }
      }
      BOOST_REQUIRE(!spec_ref.empty());
      std::set<std::string> described;
      for (const auto& d : defs) {
        if (d.name != spec_ref) continue;
        for (const auto& p : d.props) described.insert(p.name);
      }
      std::set<std::string> wire;
      for (const auto& [name, bit] : kSpecFields) {
        if (kind->Info().spec_fields & bit) wire.insert(name);
      }
      BOOST_TEST(described == wire, boost::test_tools::per_element());
    }
  }
}

BOOST_AUTO_TEST_CASE(every_column_gets_a_cell) {
  for (const reg::Strategy* kind : reg::AllKinds()) {
    BOOST_TEST_CONTEXT(kind->Info().kind_name) {
      std::string table = ph::RenderTable(kind->kind(), {Full(kind->kind())}, "1", "None", true,
                                          1'767'225'660'000'000);
      rapidjson::Document d;
      d.Parse(table.c_str());
      BOOST_REQUIRE(!d.HasParseError());
      const auto& columns = d["columnDefinitions"];
      BOOST_TEST(columns.Size() == kind->Columns().size() + 2);  // with Name and Age
      BOOST_TEST(d["rows"][0]["cells"].Size() == columns.Size());
      for (const auto& c : kind->Columns()) BOOST_TEST(std::string(c.description).size() > 10u);
    }
  }
}

BOOST_AUTO_TEST_CASE(selectable_fields_are_accepted_and_read) {
  for (const reg::Strategy* kind : reg::AllKinds()) {
    const auto supported = ph::SupportedFieldSelectors(kind->kind());
    for (const auto& f : kind->SelectableFields()) {
      BOOST_TEST_CONTEXT(f.path) {
        const std::string path(f.path);
        BOOST_TEST((std::find(supported.begin(), supported.end(), path) != supported.end()));
        BOOST_TEST(ph::FieldValue(*Full(kind->kind()), path).value() == f.value(*Full(kind->kind())));
      }
    }
  }
  // Fields of another kind are not this kind's.
  BOOST_TEST(!ph::FieldValue(*Full(ps::Kind::kPoolLease), "spec.poolName").has_value());
  BOOST_TEST(ph::FieldValue(*Full(ps::Kind::kDelegatedLease), "spec.poolName").value() == "p");
}
