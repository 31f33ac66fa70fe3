#define BOOST_TEST_MODULE selectors
#include <boost/test/unit_test.hpp>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "handlers/selectors.h"
#include "store/api_error.h"

namespace poolcoord::handlers {
namespace {

using Labels = std::map<std::string, std::string>;

LabelSelector MustParse(std::string_view text) {
  auto selector = LabelSelector::Parse(text);
  BOOST_REQUIRE_MESSAGE(selector.ok(), std::string(selector.status().message()));
  return *selector;
}

// The message of a parse failure, after checking it is a 400 BadRequest.
std::string ParseError(std::string_view text) {
  auto selector = LabelSelector::Parse(text);
  BOOST_REQUIRE_MESSAGE(!selector.ok(), "expected a parse error for: " + std::string(text));
  store::ApiErrorInfo info = store::ApiErrorFromStatus(selector.status());
  BOOST_TEST(info.code == 400);
  BOOST_TEST(info.reason == "BadRequest");
  return info.message;
}

const Labels kGold = {{"suite", "t"}, {"tier", "gold"}};
const Labels kSilver = {{"suite", "t"}, {"tier", "silver"}};
const Labels kNoTier = {{"suite", "t"}};

BOOST_AUTO_TEST_SUITE(label_selector)

BOOST_AUTO_TEST_CASE(empty_selects_everything) {
  for (std::string_view text : {"", "   ", "\t"}) {
    LabelSelector s = MustParse(text);
    BOOST_TEST(s.Empty());
    BOOST_TEST(s.Matches({}));
    BOOST_TEST(s.Matches(kGold));
  }
  BOOST_TEST(LabelSelector().Matches(kGold));
}

BOOST_AUTO_TEST_CASE(equality_operators) {
  for (std::string_view text : {"tier=gold", "tier==gold", " tier = gold "}) {
    LabelSelector s = MustParse(text);
    BOOST_TEST(!s.Empty());
    BOOST_TEST(s.Matches(kGold));
    BOOST_TEST(!s.Matches(kSilver));
    BOOST_TEST(!s.Matches(kNoTier));
  }
  LabelSelector ne = MustParse("tier!=gold");
  BOOST_TEST(!ne.Matches(kGold));
  BOOST_TEST(ne.Matches(kSilver));
  BOOST_TEST(ne.Matches(kNoTier));  // != matches objects without the key
}

BOOST_AUTO_TEST_CASE(comma_is_and) {
  LabelSelector s = MustParse("suite=t,tier=gold");
  BOOST_TEST(s.requirements().size() == 2u);
  BOOST_TEST(s.Matches(kGold));
  BOOST_TEST(!s.Matches(kSilver));
  BOOST_TEST(!s.Matches({{"tier", "gold"}}));
}

BOOST_AUTO_TEST_CASE(set_operators) {
  LabelSelector in = MustParse("tier in (silver, bronze)");
  BOOST_TEST(!in.Matches(kGold));
  BOOST_TEST(in.Matches(kSilver));
  BOOST_TEST(!in.Matches(kNoTier));
  LabelSelector notin = MustParse("tier notin (gold)");
  BOOST_TEST(!notin.Matches(kGold));
  BOOST_TEST(notin.Matches(kSilver));
  BOOST_TEST(notin.Matches(kNoTier));
  // Values are sorted and deduplicated, as sets.String.List() gives them.
  auto values = MustParse("k in (b,a,b)").requirements()[0].values;
  BOOST_TEST((values == std::vector<std::string>{"a", "b"}));
}

BOOST_AUTO_TEST_CASE(empty_slots_in_a_set_mean_the_empty_value) {
  LabelSelector s = MustParse("k in (a,)");
  BOOST_TEST((s.requirements()[0].values == std::vector<std::string>{"", "a"}));
  BOOST_TEST(s.Matches({{"k", ""}}));
  BOOST_TEST(MustParse("k in ()").Matches({{"k", ""}}));
  BOOST_TEST(!MustParse("k in ()").Matches({{"k", "a"}}));
  BOOST_TEST(MustParse("k=").Matches({{"k", ""}}));
  BOOST_TEST(!MustParse("k=").Matches({}));
}

BOOST_AUTO_TEST_CASE(exists_and_does_not_exist) {
  LabelSelector exists = MustParse("suite=t,tier");
  BOOST_TEST(exists.Matches(kGold));
  BOOST_TEST(!exists.Matches(kNoTier));
  LabelSelector absent = MustParse("suite=t, !tier");
  BOOST_TEST(!absent.Matches(kGold));
  BOOST_TEST(absent.Matches(kNoTier));
  BOOST_TEST((absent.requirements()[1].op == LabelSelector::Operator::kDoesNotExist));
}

BOOST_AUTO_TEST_CASE(keywords_are_identifiers_in_key_and_value_position) {
  LabelSelector s = MustParse("in in (notin)");
  BOOST_TEST(s.Matches({{"in", "notin"}}));
  BOOST_TEST(MustParse("notin=in").Matches({{"notin", "in"}}));
}

BOOST_AUTO_TEST_CASE(prefixed_keys) {
  LabelSelector s = MustParse("apps.openyurt.io/nodepool=hz");
  BOOST_TEST(s.Matches({{"apps.openyurt.io/nodepool", "hz"}}));
}

BOOST_AUTO_TEST_CASE(gt_and_lt_compare_integers) {
  LabelSelector gt = MustParse("n>5");
  BOOST_TEST(gt.Matches({{"n", "6"}}));
  BOOST_TEST(!gt.Matches({{"n", "5"}}));
  BOOST_TEST(!gt.Matches({{"n", "x"}}));
  BOOST_TEST(!gt.Matches({}));
  BOOST_TEST(MustParse("n<5").Matches({{"n", "-1"}}));
  BOOST_TEST(ParseError("n>x").find("the value must be an integer") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(syntax_errors) {
  BOOST_TEST(ParseError("tier in") == "unable to parse requirement: found '' expected: '('");
  BOOST_TEST(ParseError("tier in (a") == "unable to parse requirement: found '', expected: ',' or ')'");
  BOOST_TEST(ParseError("tier in (a b)") ==
             "unable to parse requirement: found 'b', expected: ',' or ')'");
  BOOST_TEST(ParseError("tier gold") ==
             "unable to parse requirement: found 'gold', expected: in, notin, =, ==, !=, gt, lt");
  BOOST_TEST(ParseError("tier=gold)") == "found ')', expected: ',' or 'end of string'");
  BOOST_TEST(ParseError("tier=gold,") == "found '', expected: identifier after ','");
  BOOST_TEST(ParseError(",tier") == "found ',', expected: !, identifier, or 'end of string'");
  BOOST_TEST(ParseError("!tier=gold") == "found '=', expected: ',' or 'end of string'");
  BOOST_TEST(ParseError("tier=(gold)") == "unable to parse requirement: found '(', expected: identifier");
  BOOST_TEST(ParseError("tier in (=)") ==
             "unable to parse requirement: found '=', expected: ',', ')' or identifier");
}

BOOST_AUTO_TEST_CASE(invalid_keys_and_values) {
  std::string key_error = ParseError("Bad_Key_=x");
  BOOST_TEST(key_error.find("unable to parse requirement: key: Invalid value: \"Bad_Key_\": name "
                            "part must consist of alphanumeric characters") == 0u);
  std::string value_error = ParseError("tier=-gold");
  BOOST_TEST(value_error.find("unable to parse requirement: values[0][tier]: Invalid value: "
                              "\"-gold\": a valid label must be an empty string") == 0u);
  std::string long_value = "tier=" + std::string(64, 'a');
  BOOST_TEST(ParseError(long_value).find("must be no more than 63 characters") !=
             std::string::npos);
  BOOST_TEST(MustParse("tier=" + std::string(63, 'a')).requirements().size() == 1u);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(field_selector)

const std::vector<std::string> kFields = {"metadata.name", "metadata.namespace", "spec.poolName"};

std::optional<std::string> Get(std::string_view field) {
  if (field == "metadata.name") return std::string("hz-3");
  if (field == "spec.poolName") return std::string("hz");
  return std::nullopt;  // metadata.namespace: cluster-scoped
}

FieldSelector MustParseFields(std::string_view text) {
  auto selector = FieldSelector::Parse(text, kFields);
  BOOST_REQUIRE_MESSAGE(selector.ok(), std::string(selector.status().message()));
  return *selector;
}

BOOST_AUTO_TEST_CASE(empty_selects_everything) {
  FieldSelector s = MustParseFields("");
  BOOST_TEST(s.Empty());
  BOOST_TEST(s.Matches(Get));
  BOOST_TEST(!s.ExactName().has_value());
  BOOST_TEST(FieldSelector().Matches(Get));
}

BOOST_AUTO_TEST_CASE(operators) {
  BOOST_TEST(MustParseFields("metadata.name=hz-3").Matches(Get));
  BOOST_TEST(MustParseFields("metadata.name==hz-3").Matches(Get));
  BOOST_TEST(!MustParseFields("metadata.name=hz-4").Matches(Get));
  BOOST_TEST(MustParseFields("metadata.name!=hz-4").Matches(Get));
  BOOST_TEST(!MustParseFields("metadata.name!=hz-3").Matches(Get));
  BOOST_TEST(MustParseFields("metadata.name=hz-3,spec.poolName=hz").Matches(Get));
  BOOST_TEST(!MustParseFields("metadata.name=hz-3,spec.poolName=bj").Matches(Get));
}

BOOST_AUTO_TEST_CASE(absent_value_compares_as_empty) {
  BOOST_TEST(MustParseFields("metadata.namespace=").Matches(Get));
  BOOST_TEST(!MustParseFields("metadata.namespace=default").Matches(Get));
  BOOST_TEST(MustParseFields("metadata.namespace!=default").Matches(Get));
  BOOST_TEST(!MustParseFields("metadata.namespace!=").Matches(Get));
}

BOOST_AUTO_TEST_CASE(escaped_values) {
  FieldSelector s = MustParseFields("metadata.name=a\\,b\\=c\\\\d");
  BOOST_TEST(s.terms()[0].value == "a,b=c\\d");
}

BOOST_AUTO_TEST_CASE(exact_name) {
  BOOST_TEST(MustParseFields("metadata.name=hz-3").ExactName().value_or("") == "hz-3");
  BOOST_TEST(MustParseFields("spec.poolName=hz,metadata.name==n1").ExactName().value_or("") ==
             "n1");
  BOOST_TEST(!MustParseFields("metadata.name!=hz-3").ExactName().has_value());
  BOOST_TEST(!MustParseFields("spec.poolName=hz").ExactName().has_value());
}

BOOST_AUTO_TEST_CASE(unknown_field_is_bad_request_listing_supported_ones) {
  auto s = FieldSelector::Parse("spec.bogus=x", {"metadata.name", "metadata.namespace"});
  BOOST_REQUIRE(!s.ok());
  store::ApiErrorInfo info = store::ApiErrorFromStatus(s.status());
  BOOST_TEST(info.code == 400);
  BOOST_TEST(info.reason == "BadRequest");
  BOOST_TEST(info.message ==
             "\"spec.bogus\" is not a known field selector: only \"metadata.name\", "
             "\"metadata.namespace\"");
}

BOOST_AUTO_TEST_CASE(malformed_terms) {
  for (std::string_view text : {"metadata.name", "metadata.name=a=b", "metadata.name=a\\x",
                                "metadata.name=a\\"}) {
    auto s = FieldSelector::Parse(text, kFields);
    BOOST_REQUIRE_MESSAGE(!s.ok(), std::string(text));
    BOOST_TEST(store::ApiErrorFromStatus(s.status()).code == 400);
  }
  auto s = FieldSelector::Parse("metadata.name", kFields);
  BOOST_TEST(store::ApiErrorFromStatus(s.status()).message ==
             "invalid selector: 'metadata.name'; can't understand 'metadata.name'");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace poolcoord::handlers
