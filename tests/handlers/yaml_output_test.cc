#define BOOST_TEST_MODULE yaml_output
#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include "handlers/yaml_output.h"

#include "handlers/yaml_input.h"
#include "rapidjson/document.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"

namespace ph = poolcoord::handlers;

namespace {

std::string Compact(const rapidjson::Value& v) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  v.Accept(w);
  return std::string(buf.GetString(), buf.GetSize());
}

ph::Request WithAccept(const std::string& accept) {
  ph::Request r;
  r.headers.emplace_back("accept", accept);
  return r;
}

}  // namespace

// Every string stays the string it was when the YAML is read back (as
// kube-apiserver's decoder, go-yaml v2, reads YAML 1.1: "true", "1", "~",
// "2024-01-01" would be other types if written plain).
BOOST_AUTO_TEST_CASE(ReadBackGivesTheSameJson) {
  const std::vector<std::string> strings = {
      "", "true", "True", "yes", "NO", "on", "Off", "y", "n", "null", "Null", "~", "1", "-1", "+1",
      "1.5", ".5", "1e3", "0x1f", "0o7", "0b1", "1_000", ".inf", "-.Inf", ".nan", "2024-01-01",
      "2024-01-01T00:00:00Z", "a: b", "a #b", "#c", "- x", "-", "?", ":", "*a", "&a", "!x", "%x",
      "@x", "`x", "{a}", "[a]", "'q'", "\"q\"", " lead", "trail ", "multi\nline", "tab\tx",
      "h\u00e9", "\u5317\u4eac-1", "back\\slash", "plain-name.x/y_z", "3f2a-uid"};
  std::string json = R"({"k":{)";
  for (size_t i = 0; i < strings.size(); ++i) {
    rapidjson::StringBuffer b;
    rapidjson::Writer<rapidjson::StringBuffer> w(b);
    w.String(strings[i].c_str(), static_cast<rapidjson::SizeType>(strings[i].size()));
    json += (i ? "," : "") + std::string("\"s") + std::to_string(i) + "\":" + b.GetString();
  }
  json += R"(},"n":3,"neg":-7,"t":true,"f":false,"z":null,"e":{},"a":[],"l":[{"x":1},"y",[2]]})";
  auto yaml = ph::JsonToYaml(json);
  BOOST_REQUIRE(yaml.ok());
  auto back = ph::ParseYamlBody(*yaml);
  BOOST_REQUIRE_MESSAGE(back.ok(), back.status() << "\n" << *yaml);
  rapidjson::Document want;
  want.Parse(json.c_str());
  // Members compare by name (rapidjson's ==): the YAML has them sorted.
  BOOST_TEST((back->doc == want), Compact(back->doc) << "\n" << Compact(want));
}

// Keys sorted, block style, empty maps and lists in flow style, as
// sigs.k8s.io/yaml writes them.
BOOST_AUTO_TEST_CASE(KeysSortedAndEmptiesInFlow) {
  auto yaml = ph::JsonToYaml(R"({"kind":"Status","apiVersion":"v1","metadata":{},"code":404,"a":[]})");
  BOOST_REQUIRE(yaml.ok());
  BOOST_TEST(*yaml == "a: []\napiVersion: v1\ncode: 404\nkind: Status\nmetadata: {}\n");
  BOOST_TEST(!ph::JsonToYaml("{nope").ok());
}

BOOST_AUTO_TEST_CASE(OnlyAPlainJsonAnswerIsReencoded) {
  ph::Response r;
  r.status = 200;
  r.SetHeader("Content-Type", "application/json");
  r.body = R"({"b":1,"a":"x"})";
  ph::Response y = ph::ToYamlResponse(r);
  BOOST_TEST(y.body == "a: x\nb: 1\n");
  BOOST_REQUIRE(y.headers.size() == 1u);
  BOOST_TEST(y.headers[0].second == "application/yaml");
  r.headers[0].second = "application/json;as=Table;v=v1;g=meta.k8s.io";
  BOOST_TEST(ph::ToYamlResponse(r).body == r.body);
}

BOOST_AUTO_TEST_CASE(YamlWhenAskedForFirst) {
  BOOST_TEST(ph::PrefersYaml(WithAccept("application/yaml")));
  BOOST_TEST(ph::PrefersYaml(WithAccept("application/vnd.kubernetes.protobuf, application/yaml")));
  BOOST_TEST(ph::PrefersYaml(WithAccept("application/json;q=0.5, application/yaml")));
  BOOST_TEST(!ph::PrefersYaml(WithAccept("application/json, application/yaml")));
  BOOST_TEST(!ph::PrefersYaml(WithAccept("*/*")));
  BOOST_TEST(!ph::PrefersYaml(WithAccept("")));
  BOOST_TEST(!ph::PrefersYaml(WithAccept("application/json;as=Table;v=v1;g=meta.k8s.io, application/yaml")));
}
