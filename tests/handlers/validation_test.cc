#define BOOST_TEST_MODULE validation
#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include "handlers/validation.h"
#include "base/quote.h"
#include "store/api_error.h"
#include "store/object.h"

namespace poolcoord::handlers {
namespace {

const char kSubdomainMsg[] =
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const char kNamePartMsg[] =
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

store::ObjectMeta Meta(std::string name) {
  store::ObjectMeta meta;
  meta.name = std::move(name);
  return meta;
}

// A subdomain of exactly `n` characters: 63-character labels joined by dots.
std::string SubdomainOfLength(size_t n) {
  std::string s;
  while (s.size() < n) {
    if (!s.empty() && s.size() % 64 == 63) {
      s.push_back(s.size() + 1 == n ? 'a' : '.');
    } else {
      s.push_back('a');
    }
  }
  return s;
}

BOOST_AUTO_TEST_SUITE(is_dns1123_subdomain)

BOOST_AUTO_TEST_CASE(valid_names) {
  for (std::string_view v : {"a", "hz-1", "example.com", "0", "a.b-c.d", "1-2"}) {
    BOOST_TEST(IsDNS1123Subdomain(v).empty(), v);
  }
}

BOOST_AUTO_TEST_CASE(invalid_names_carry_kube_message) {
  for (std::string_view v : {"", "Bad_Name", "-a", "a-", "a..b", ".a", "a.", "A", "a_b"}) {
    auto errs = IsDNS1123Subdomain(v);
    BOOST_TEST_REQUIRE(errs.size() == 1u, v);
    BOOST_TEST(errs[0] == kSubdomainMsg);
  }
}

BOOST_AUTO_TEST_CASE(length_boundary_253) {
  std::string ok = SubdomainOfLength(253);
  BOOST_REQUIRE(ok.size() == 253u);
  BOOST_TEST(IsDNS1123Subdomain(ok).empty());
  auto errs = IsDNS1123Subdomain(ok + "a");
  BOOST_TEST_REQUIRE(errs.size() == 1u);
  BOOST_TEST(errs[0] == "must be no more than 253 characters");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(is_qualified_name)

BOOST_AUTO_TEST_CASE(valid_keys) {
  for (std::string_view v : {"a", "MyName", "my.name", "123-abc", "a_b", "example.com/MyName",
                             "apps.openyurt.io/nodepool", "openyurt.io/delegate-heartbeat"}) {
    BOOST_TEST(IsQualifiedName(v).empty(), v);
  }
}

BOOST_AUTO_TEST_CASE(name_part_boundary_63) {
  BOOST_TEST(IsQualifiedName(std::string(63, 'a')).empty());
  auto errs = IsQualifiedName(std::string(64, 'a'));
  BOOST_TEST_REQUIRE(errs.size() == 1u);
  BOOST_TEST(errs[0] == "name part must be no more than 63 characters");
  BOOST_TEST(IsQualifiedName("example.com/" + std::string(63, 'a')).empty());
}

BOOST_AUTO_TEST_CASE(bad_name_part) {
  auto errs = IsQualifiedName("-bad");
  BOOST_TEST_REQUIRE(errs.size() == 1u);
  BOOST_TEST(errs[0] == kNamePartMsg);
  // Empty: both the emptiness and the regex complain, as in apimachinery.
  errs = IsQualifiedName("");
  BOOST_TEST_REQUIRE(errs.size() == 2u);
  BOOST_TEST(errs[0] == "name part must be non-empty");
  BOOST_TEST(errs[1] == kNamePartMsg);
}

BOOST_AUTO_TEST_CASE(bad_prefix) {
  auto errs = IsQualifiedName("/a");
  BOOST_TEST_REQUIRE(errs.size() == 1u);
  BOOST_TEST(errs[0] == "prefix part must be non-empty");
  errs = IsQualifiedName("Example.com/a");
  BOOST_TEST_REQUIRE(errs.size() == 1u);
  BOOST_TEST(errs[0] == std::string("prefix part ") + kSubdomainMsg);
  errs = IsQualifiedName("a/b/c");
  BOOST_TEST_REQUIRE(errs.size() == 1u);
  BOOST_TEST(errs[0].find("a qualified name must consist of") == 0u);
  BOOST_TEST(errs[0].find("with an optional DNS subdomain prefix and '/' (e.g. "
                          "'example.com/MyName')") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(is_valid_label_value)

BOOST_AUTO_TEST_CASE(values) {
  BOOST_TEST(IsValidLabelValue("").empty());
  BOOST_TEST(IsValidLabelValue("true").empty());
  BOOST_TEST(IsValidLabelValue(std::string(63, 'x')).empty());
  auto errs = IsValidLabelValue(std::string(64, 'x'));
  BOOST_TEST_REQUIRE(errs.size() == 1u);
  BOOST_TEST(errs[0] == "must be no more than 63 characters");
  errs = IsValidLabelValue("a/b");
  BOOST_TEST_REQUIRE(errs.size() == 1u);
  BOOST_TEST(errs[0] ==
             "a valid label must be an empty string or consist of alphanumeric characters, '-', "
             "'_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  "
             "or 'my_value',  or '12345', regex used for validation is "
             "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(go_quote)

BOOST_AUTO_TEST_CASE(escapes_like_go) {
  BOOST_TEST(base::GoQuote("abc") == "\"abc\"");
  BOOST_TEST(base::GoQuote("a\"b\\c") == "\"a\\\"b\\\\c\"");
  BOOST_TEST(base::GoQuote("a\nb\x01") == "\"a\\nb\\x01\"");
  BOOST_TEST(base::GoQuote("h\xC3\xA9") == "\"h\xC3\xA9\"");  // valid UTF-8 kept
  BOOST_TEST(base::GoQuote("\xFF") == "\"\\xff\"");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(validate_object_meta)

BOOST_AUTO_TEST_CASE(valid_meta_has_no_causes) {
  store::ObjectMeta meta = Meta("hz");
  meta.labels = {{"apps.openyurt.io/nodepool", "hz"}, {"empty", ""}};
  meta.annotations = {{"openyurt.io/delegate-heartbeat", "true"}, {"Upper.Case/Key", "x"}};
  meta.finalizers = {"example.com/cleanup"};
  BOOST_TEST(ValidateObjectMeta(meta, true).empty());
  BOOST_TEST(ValidateObjectMeta(meta, false).empty());
}

BOOST_AUTO_TEST_CASE(name_required_unless_generate_name_on_create) {
  store::ObjectMeta meta;
  auto causes = ValidateObjectMeta(meta, true);
  BOOST_TEST_REQUIRE(causes.size() == 1u);
  BOOST_TEST(causes[0].type == "FieldValueRequired");
  BOOST_TEST(causes[0].field == "metadata.name");
  BOOST_TEST(causes[0].message == "Required value: name or generateName is required");
  meta.generate_name = "pool-";
  BOOST_TEST(ValidateObjectMeta(meta, true).empty());
  BOOST_TEST(ValidateObjectMeta(meta, false).size() == 1u);
  meta.generate_name = "Pool-";
  causes = ValidateObjectMeta(meta, true);
  BOOST_TEST_REQUIRE(causes.size() == 1u);
  BOOST_TEST(causes[0].field == "metadata.generateName");
}

BOOST_AUTO_TEST_CASE(bad_name_message_as_kube) {
  auto causes = ValidateObjectMeta(Meta("Bad_Name"), true);
  BOOST_TEST_REQUIRE(causes.size() == 1u);
  BOOST_TEST(causes[0].type == "FieldValueInvalid");
  BOOST_TEST(causes[0].field == "metadata.name");
  BOOST_TEST(causes[0].message == std::string("Invalid value: \"Bad_Name\": ") + kSubdomainMsg);
}

BOOST_AUTO_TEST_CASE(name_length_boundary) {
  BOOST_TEST(ValidateObjectMeta(Meta(SubdomainOfLength(253)), true).empty());
  auto causes = ValidateObjectMeta(Meta(SubdomainOfLength(254)), true);
  BOOST_TEST_REQUIRE(causes.size() == 1u);
  BOOST_TEST(causes[0].message.find("must be no more than 253 characters") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(labels) {
  store::ObjectMeta meta = Meta("hz");
  meta.labels = {{"bad key", "v"}, {"k", std::string(64, 'v')}};
  auto causes = ValidateObjectMeta(meta, true);
  BOOST_TEST_REQUIRE(causes.size() == 2u);
  for (const auto& c : causes) BOOST_TEST(c.field == "metadata.labels");
  BOOST_TEST(causes[0].message == std::string("Invalid value: \"bad key\": ") + kNamePartMsg);
  BOOST_TEST(causes[1].message ==
             "Invalid value: \"" + std::string(64, 'v') + "\": must be no more than 63 characters");
}

BOOST_AUTO_TEST_CASE(annotation_keys) {
  store::ObjectMeta meta = Meta("hz");
  meta.annotations = {{"-bad", "v"}};
  auto causes = ValidateObjectMeta(meta, true);
  BOOST_TEST_REQUIRE(causes.size() == 1u);
  BOOST_TEST(causes[0].field == "metadata.annotations");
}

BOOST_AUTO_TEST_CASE(annotation_total_size_boundary) {
  store::ObjectMeta meta = Meta("hz");
  // Keys count too: "k" (1 byte) + value = exactly 256 KiB.
  meta.annotations = {{"k", std::string(kTotalAnnotationSizeLimitBytes - 1, 'x')}};
  BOOST_TEST(ValidateObjectMeta(meta, true).empty());
  meta.annotations["k"].push_back('x');
  auto causes = ValidateObjectMeta(meta, true);
  BOOST_TEST_REQUIRE(causes.size() == 1u);
  BOOST_TEST(causes[0].type == "FieldValueTooLong");
  BOOST_TEST(causes[0].field == "metadata.annotations");
  BOOST_TEST(causes[0].message == "Too long: may not be more than 262144 bytes");
  // Spread over several annotations.
  meta.annotations = {{"a", std::string(131071, 'x')}, {"b", std::string(131071, 'x')}};
  BOOST_TEST(ValidateObjectMeta(meta, true).empty());
  meta.annotations["c"] = "";
  BOOST_TEST(ValidateObjectMeta(meta, true).size() == 1u);
}

BOOST_AUTO_TEST_CASE(finalizers) {
  store::ObjectMeta meta = Meta("hz");
  meta.finalizers = {"example.com/ok", "bad finalizer"};
  auto causes = ValidateObjectMeta(meta, true);
  BOOST_TEST_REQUIRE(causes.size() == 1u);
  BOOST_TEST(causes[0].field == "metadata.finalizers");
  meta.finalizers = {"orphan", "foregroundDeletion"};
  causes = ValidateObjectMeta(meta, true);
  BOOST_TEST_REQUIRE(causes.size() == 1u);
  BOOST_TEST(causes[0].message ==
             "Invalid value: []string{\"orphan\", \"foregroundDeletion\"}: finalizer orphan and "
             "foregroundDeletion cannot be both set");
}

// kube-apiserver 1.32.6 answers a 1 MB metadata.name with its whole value in
// the cause (field.Invalid's ErrorBody omits no value): 1,048,630 characters.
BOOST_AUTO_TEST_CASE(a_megabyte_name_is_quoted_whole_as_kube_apiserver_quotes_it) {
  const std::string name(1 << 20, 'a');
  auto causes = ValidateObjectMeta(Meta(name), true);
  BOOST_TEST_REQUIRE(causes.size() == 1u);
  BOOST_TEST(causes[0].type == "FieldValueInvalid");
  BOOST_TEST(causes[0].field == "metadata.name");
  BOOST_TEST((causes[0].message ==
              "Invalid value: \"" + name + "\": must be no more than 253 characters"));
  BOOST_TEST(causes[0].message.size() == 1048630u);
}

// The texts and choices kube-apiserver 1.32.6 made for a custom resource's
// finalizers (each checked against it).
BOOST_AUTO_TEST_CASE(finalizer_warnings) {
  const std::string kPlain =
      ": prefer a domain-qualified finalizer name to avoid accidental conflicts with other "
      "finalizer writers";
  const std::string kWithPath =
      ": prefer a domain-qualified finalizer name including a path (/) to avoid accidental "
      "conflicts with other finalizer writers";
  const std::vector<std::string> created = {"zeta", "foo", "foo", "a/b", "kubernetes.io/x", "orphan",
                                            "kubernetes", "Foo", "a.b", "foregroundDeletion"};
  const std::vector<std::string> want = {
      "metadata.finalizers: \"Foo\"" + kPlain, "metadata.finalizers: \"a.b\"" + kWithPath,
      "metadata.finalizers: \"foo\"" + kPlain, "metadata.finalizers: \"zeta\"" + kPlain};
  BOOST_TEST(FinalizerWarnings(created, nullptr) == want, boost::test_tools::per_element());
  // An update warns of the finalizers it adds alone.
  const std::vector<std::string> old = {"foo", "zeta"};
  BOOST_TEST(FinalizerWarnings({"foo", "bar", "zeta"}, &old) ==
                 std::vector<std::string>{"metadata.finalizers: \"bar\"" + kPlain},
             boost::test_tools::per_element());
  BOOST_TEST(FinalizerWarnings(old, &old).empty());
  BOOST_TEST(FinalizerWarnings({"foo"}, &old).empty());  // a removal
  BOOST_TEST(FinalizerWarnings({}, nullptr).empty());
  BOOST_TEST(FinalizerWarnings({"example.com/cleanup", "orphan"}, nullptr).empty());
}

// The input a newcomer's trial stored unchecked: a reference with nothing but
// an empty uid, and two references marked controller.
BOOST_AUTO_TEST_CASE(owner_references) {
  store::ObjectMeta meta = Meta("hz");
  meta.owner_references_json =
      R"([{"apiVersion":"v1","kind":"Node","name":"a","uid":"x","controller":true},)"
      R"({"apiVersion":"apps/v1","kind":"Deployment","name":"b","uid":"y","controller":false}])";
  BOOST_TEST(ValidateObjectMeta(meta, true).empty());
  meta.owner_references_json =
      R"([{"uid":""},{"apiVersion":"v1","kind":"Node","name":"a","uid":"x","controller":true},)"
      R"({"apiVersion":"a/b/c","kind":"Node","name":"b","uid":"y","controller":true}])";
  auto causes = ValidateObjectMeta(meta, true);
  std::vector<std::string> got;
  for (const auto& c : causes) got.push_back(c.field + ": " + c.message);
  const std::vector<std::string> want = {
      R"(metadata.ownerReferences.apiVersion: Invalid value: "": version must not be empty)",
      R"(metadata.ownerReferences.kind: Invalid value: "": must not be empty)",
      R"(metadata.ownerReferences.name: Invalid value: "": must not be empty)",
      R"(metadata.ownerReferences.uid: Invalid value: "": must not be empty)",
      R"(metadata.ownerReferences.apiVersion: Invalid value: "a/b/c": version must not be empty)",
  };
  BOOST_TEST_REQUIRE(got.size() == want.size() + 1, "causes: " << got.size());
  for (size_t i = 0; i < want.size(); ++i) BOOST_TEST(got[i] == want[i]);
  BOOST_TEST(causes.back().field == "metadata.ownerReferences");
  BOOST_TEST(causes.back().message.find("Only one reference can have Controller set to true. Found "
                                        "\"true\" in references for Node/a and Node/b") !=
             std::string::npos);
}

BOOST_AUTO_TEST_CASE(negative_generation) {
  store::ObjectMeta meta = Meta("hz");
  meta.generation = -1;
  auto causes = ValidateObjectMeta(meta, false);
  BOOST_TEST_REQUIRE(causes.size() == 1u);
  BOOST_TEST(causes[0].field == "metadata.generation");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(validate_object_meta_update)

BOOST_AUTO_TEST_CASE(unchanged_is_valid) {
  store::ObjectMeta old_meta = Meta("hz");
  old_meta.uid = "u1";
  store::ObjectMeta new_meta = old_meta;
  new_meta.labels = {{"a", "b"}};
  BOOST_TEST(ValidateObjectMetaUpdate(old_meta, new_meta).empty());
  new_meta.uid.clear();  // the caller copies it
  BOOST_TEST(ValidateObjectMetaUpdate(old_meta, new_meta).empty());
}

BOOST_AUTO_TEST_CASE(name_and_uid_are_immutable) {
  store::ObjectMeta old_meta = Meta("hz");
  old_meta.uid = "u1";
  store::ObjectMeta new_meta = old_meta;
  new_meta.name = "other";
  new_meta.uid = "u2";
  auto causes = ValidateObjectMetaUpdate(old_meta, new_meta);
  BOOST_TEST_REQUIRE(causes.size() == 2u);
  BOOST_TEST(causes[0].field == "metadata.name");
  BOOST_TEST(causes[0].message == "Invalid value: \"other\": field is immutable");
  BOOST_TEST(causes[1].field == "metadata.uid");
}

BOOST_AUTO_TEST_CASE(finalizers_while_deleting) {
  store::ObjectMeta old_meta = Meta("hz");
  old_meta.finalizers = {"example.com/a", "example.com/b"};
  store::ObjectMeta new_meta = old_meta;
  new_meta.finalizers = {"example.com/a", "example.com/c"};
  // Not being deleted: any change is fine.
  BOOST_TEST(ValidateObjectMetaUpdate(old_meta, new_meta).empty());
  old_meta.deletion_timestamp = 1700000000;
  new_meta.deletion_timestamp = 1700000000;
  auto causes = ValidateObjectMetaUpdate(old_meta, new_meta);
  BOOST_TEST_REQUIRE(causes.size() == 1u);
  BOOST_TEST(causes[0].type == "FieldValueForbidden");
  BOOST_TEST(causes[0].field == "metadata.finalizers");
  BOOST_TEST(causes[0].message ==
             "Forbidden: no new finalizers can be added if the object is being deleted, found new "
             "finalizers []string{\"example.com/c\"}");
  // Removing finalizers while deleting is how deletion completes.
  new_meta.finalizers = {"example.com/b"};
  BOOST_TEST(ValidateObjectMetaUpdate(old_meta, new_meta).empty());
}

BOOST_AUTO_TEST_CASE(leaves_object_checks_to_validate_object_meta) {
  // Calling both (as the REST handler does) must report a bad label once.
  store::ObjectMeta old_meta = Meta("hz");
  store::ObjectMeta new_meta = old_meta;
  new_meta.labels = {{"k", "-v"}};
  BOOST_TEST(ValidateObjectMetaUpdate(old_meta, new_meta).empty());
  auto causes = ValidateObjectMeta(new_meta, false);
  BOOST_TEST_REQUIRE(causes.size() == 1u);
  BOOST_TEST(causes[0].field == "metadata.labels");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace poolcoord::handlers
