#define BOOST_TEST_MODULE json_input
#include <boost/test/unit_test.hpp>

#include <string>

#include "handlers/json_input.h"

#include "absl/strings/str_cat.h"
#include "handlers/yaml_input.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"

namespace poolcoord::handlers {
namespace {

std::string Text(const rapidjson::Value& v) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  v.Accept(w);
  return std::string(buf.GetString(), buf.GetSize());
}

const std::string kFFFD = "\xEF\xBF\xBD";

BOOST_AUTO_TEST_SUITE(Utf8)

BOOST_AUTO_TEST_CASE(EachInvalidByteBecomesReplacement) {
  std::string out;
  BOOST_TEST(!SanitizeUtf8("plain h\xC3\xA9 \xF0\x9F\x98\x80", &out));
  BOOST_TEST(SanitizeUtf8("a\xFF\xFE" "b", &out));
  BOOST_TEST(out == "a" + kFFFD + kFFFD + "b");  // kube-apiserver 1.32 stores "a\ufffd\ufffdb"
  // Truncated, overlong and surrogate encodings are invalid byte by byte.
  BOOST_TEST(SanitizeUtf8("\xE2\x82", &out));
  BOOST_TEST(out == kFFFD + kFFFD);
  BOOST_TEST(SanitizeUtf8("\xC0\xAF", &out));
  BOOST_TEST(out == kFFFD + kFFFD);
  BOOST_TEST(SanitizeUtf8("\xED\xA0\x80", &out));
  BOOST_TEST(out == kFFFD + kFFFD + kFFFD);
}

BOOST_AUTO_TEST_CASE(LoneSurrogateEscapes) {
  std::string out;
  // As kube-apiserver stored "\ud800x\udc00y\ud83d\ude00": "\ufffdx\ufffdy😀".
  BOOST_TEST(SanitizeJsonText(R"({"a":"\ud800x\udc00y\ud83d\ude00"})", &out));
  BOOST_TEST(out == R"({"a":"\uFFFDx\uFFFDy\ud83d\ude00"})");
  BOOST_TEST(!SanitizeJsonText(R"({"a":"\ud83d\ude00 \\ud800 \u00e9"})", &out));  // escaped backslash
  BOOST_TEST(SanitizeJsonText("{\"a\":\"\\uD800\"}", &out));
  BOOST_TEST(out == R"({"a":"\uFFFD"})");
}

// The scan skips clean ASCII eight bytes at a time: whatever needs work is found
// at any offset, in the words and in the tail after them.
BOOST_AUTO_TEST_CASE(FoundAtEveryOffset) {
  for (size_t pad = 0; pad < 20; ++pad) {
    const std::string head = "{\"" + std::string(pad, 'a') + "\":\"";
    std::string out;
    BOOST_TEST(!SanitizeJsonText(head + "plain\"}", &out));
    BOOST_TEST(SanitizeJsonText(head + "\xFF\"}", &out), pad);
    BOOST_TEST(out == head + kFFFD + "\"}");
    BOOST_TEST(SanitizeJsonText(head + "\\ud800\"}", &out), pad);
    BOOST_TEST(out == head + "\\uFFFD\"}");
    BOOST_TEST(!SanitizeJsonText(head + "\xC3\xA9\"}", &out), pad);  // valid UTF-8 stays
  }
}

BOOST_AUTO_TEST_CASE(BodiesNeverKeepInvalidUtf8) {
  auto body = ParseJsonBody("{\"metadata\":{\"annotations\":{\"x\":\"a\xFF\xFE" "b\"}},"
                            "\"spec\":{\"holderIdentity\":\"h\xFFi\",\"a\":\"\\ud800\"}}");
  BOOST_REQUIRE(body.ok());
  BOOST_TEST(std::string(body->doc["metadata"]["annotations"]["x"].GetString()) == "a" + kFFFD + kFFFD + "b");
  BOOST_TEST(std::string(body->doc["spec"]["holderIdentity"].GetString()) == "h" + kFFFD + "i");
  BOOST_TEST(std::string(body->doc["spec"]["a"].GetString()) == kFFFD);
  // Outside strings an invalid byte is still malformed JSON.
  BOOST_TEST(!ParseJsonBody("{\"a\":1\xFF}").ok());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(Duplicates)

BOOST_AUTO_TEST_CASE(PathsInDocumentOrderLastWins) {
  // kube-apiserver: duplicate field "spec.leaseDurationSeconds", duplicate field "spec".
  auto body = ParseJsonBody(
      R"({"metadata":{"name":"a"},"spec":{"leaseDurationSeconds":3,"foo":1,"leaseDurationSeconds":4},)"
      "\n"
      R"("bar":2, "spec":{"leaseDurationSeconds":5,"x":[{"k":1,"k":2}]}})");
  BOOST_REQUIRE(body.ok());
  std::vector<std::string> paths;
  for (const auto& d : body->duplicates) paths.push_back(d.path + "@" + std::to_string(d.line));
  BOOST_TEST(paths == (std::vector<std::string>{"spec.leaseDurationSeconds@1", "spec@2", "spec.x[0].k@2"}),
             boost::test_tools::per_element());
  BOOST_TEST(body->duplicates[1].key == "spec");
  // The last spec, whole: the first one's "foo" does not survive.
  BOOST_TEST(Text(body->doc) == R"({"metadata":{"name":"a"},"bar":2,"spec":{"leaseDurationSeconds":5,"x":[{"k":2}]}})");
}

// The input that showed quadratic decoding: thousands of keys in one object,
// repeated ones among them, past the pairwise check's size. The answer must be
// the small case's: every repetition named with its line, the last value of each
// key kept, in document order.
BOOST_AUTO_TEST_CASE(ManyKeysSameAnswerAsFew) {
  std::string body = "{\"spec\":{";
  for (int i = 0; i < 4000; ++i) absl::StrAppend(&body, i ? "," : "", "\"u", i % 3000, "\":", i, i % 1000 == 0 ? "\n" : "");
  body += "}}";
  auto parsed = ParseJsonBody(body);
  BOOST_REQUIRE(parsed.ok());
  BOOST_REQUIRE_EQUAL(parsed->duplicates.size(), 1000u);
  BOOST_TEST(parsed->duplicates.front().path == "spec.u0");
  BOOST_TEST(parsed->duplicates.front().line == 4);  // after the newlines at 0, 1000, 2000
  BOOST_TEST(parsed->duplicates.back().path == "spec.u999");
  const rapidjson::Value& spec = parsed->doc["spec"];
  BOOST_REQUIRE_EQUAL(spec.MemberCount(), 3000u);
  // u0..u999 were repeated at 3000..3999: the later value is kept at the place
  // of its last appearance, after u1000..u2999.
  BOOST_TEST(std::string(spec.MemberBegin()->name.GetString()) == "u1000");
  BOOST_TEST(spec.MemberBegin()->value.GetInt() == 1000);
  BOOST_TEST(spec["u0"].GetInt() == 3000);
  BOOST_TEST(spec["u999"].GetInt() == 3999);
  BOOST_TEST(std::string((spec.MemberEnd() - 1)->name.GetString()) == "u999");
}

BOOST_AUTO_TEST_CASE(JsonPatchPaths) {
  auto body = ParseJsonBody(R"([{"op":"replace","path":"/spec/x","value":5,"value":6}])");
  BOOST_REQUIRE(body.ok());
  BOOST_REQUIRE(body->duplicates.size() == 1u);
  BOOST_TEST(body->duplicates[0].path == "[0].value");
  BOOST_TEST(Text(body->doc) == R"([{"op":"replace","path":"/spec/x","value":6}])");
}

BOOST_AUTO_TEST_CASE(NoneNoWork) {
  auto body = ParseJsonBody(R"({"spec":{"renewTime":"2024-01-01T00:00:00.000000Z"}})");
  BOOST_REQUIRE(body.ok());
  BOOST_TEST(body->duplicates.empty());
  BOOST_TEST(!ParseJsonBody("{").ok());
  BOOST_TEST(!ParseJsonBody(std::string(600, '[')).ok());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(Yaml)

std::string Yaml(const std::string& text) {
  auto body = ParseYamlBody(text);
  return body.ok() ? Text(body->doc) : "error: " + std::string(body.status().message());
}

BOOST_AUTO_TEST_CASE(ScalarsAsGoYamlResolvesThem) {
  BOOST_TEST(Yaml("a: 10\nb: '10'\nc: yes\nd: off\ne: ~\nf: 1.5\ng: 0x1F\nh: 0755\ni: hello\nj: \"true\"\nk:\nl: 1e3\n") ==
             R"({"a":10,"b":"10","c":true,"d":false,"e":null,"f":1.5,"g":31,"h":493,"i":"hello","j":"true","k":null,"l":1000.0})");
  BOOST_TEST(Yaml("a: !!str 10\nb: [x, 'y', 3]\nc: {d: e}\n") == R"({"a":"10","b":["x","y",3],"c":{"d":"e"}})");
  BOOST_TEST(Yaml("1: x\n") == R"({"1":"x"})");
  // The first document only.
  BOOST_TEST(Yaml("a: 1\n---\nb: 2\n") == R"({"a":1})");
  BOOST_TEST(Yaml("") == "null");
}

BOOST_AUTO_TEST_CASE(DuplicateKeysWithLines) {
  auto body = ParseYamlBody("apiVersion: v\nkind: K\nspec:\n  holderIdentity: a\n  holderIdentity: c\n");
  BOOST_REQUIRE(body.ok());
  BOOST_REQUIRE(body->duplicates.size() == 1u);
  BOOST_TEST(body->duplicates[0].line == 5);
  BOOST_TEST(body->duplicates[0].key == "holderIdentity");
  BOOST_TEST(std::string(body->doc["spec"]["holderIdentity"].GetString()) == "c");
  // JSON (what kubectl sends) takes the JSON path, with the same findings.
  auto json = ParseYamlBody(R"({"spec":{"a":1,"a":2}})");
  BOOST_REQUIRE(json.ok());
  BOOST_TEST(json->duplicates[0].line == 1);
}

BOOST_AUTO_TEST_CASE(BadInputIsABadRequestNeverACrash) {
  BOOST_TEST(Yaml("a: [").rfind("error: error decoding YAML: ", 0) == 0u);
  BOOST_TEST(Yaml("{\"a\":").rfind("error: error decoding YAML: ", 0) == 0u);
  BOOST_TEST(Yaml(std::string(1000, '[')).rfind("error: error decoding YAML: ", 0) == 0u);
  // Billion laughs: aliases expand past the node budget.
  std::string bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  for (char c = 'b'; c <= 'h'; ++c) {
    std::string prev(1, c - 1);
    bomb += std::string(1, c) + ": &" + c + " [*" + prev + ", *" + prev + ", *" + prev + ", *" +
            prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev +
            ", *" + prev + "]\n";
  }
  BOOST_TEST(Yaml(bomb).find("more than 100000 nodes") != std::string::npos);
  // Deep block nesting by indentation.
  std::string deep;
  for (int i = 0; i < 600; ++i) deep += std::string(i, ' ') + "k:\n";
  BOOST_TEST(Yaml(deep).rfind("error: error decoding YAML: ", 0) == 0u);
  // Invalid UTF-8 in YAML becomes U+FFFD too.
  BOOST_TEST(Yaml("a: \"x\xFF\"\n") == "{\"a\":\"x" + kFFFD + "\"}");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace poolcoord::handlers
