#define BOOST_TEST_MODULE informer
#include "cloud/informer.h"

#include <boost/test/unit_test.hpp>
#include <string>
#include <utility>
#include <vector>

#include "cloud/clientset.h"
#include "tests/cloud_fakes.h"

namespace pc = poolcoord::cloud;

namespace {

pc::Lease L(const std::string& name, const std::string& rv) {
  pc::Lease l;
  l.metadata.name = name;
  l.metadata.resource_version = rv;
  return l;
}

struct Recorded {
  std::vector<std::pair<std::string, std::string>> seen;  // (type, name@rv)
};

using LeaseInformer = pc::Informer<pc::LeaseInterface, pc::LeaseList>;

}  // namespace

// A relist reports what changed against the cache, DELETED included, as a
// reflector's replace does; an unchanged object (same resourceVersion) is news
// to nobody.
BOOST_AUTO_TEST_CASE(a_list_reports_the_differences) {
  poolcoord::testing::FakeLeases leases;
  Recorded r;
  LeaseInformer inf(&leases, pc::ReflectorOptions{}, [&](const std::string& type, const pc::Lease& l) {
    r.seen.emplace_back(type, l.metadata.name + "@" + l.metadata.resource_version);
  });
  BOOST_TEST(!inf.HasSynced());
  inf.Replace({L("a", "1"), L("b", "2")});
  BOOST_TEST(inf.HasSynced());
  inf.Replace({L("b", "2"), L("c", "3"), L("a", "4")});
  inf.Replace({L("c", "3")});
  const std::vector<std::pair<std::string, std::string>> want = {
      {"ADDED", "a@1"},    {"ADDED", "b@2"},                       // first list
      {"MODIFIED", "a@4"}, {"ADDED", "c@3"},                       // second
      {"DELETED", "a@4"},  {"DELETED", "b@2"}};                    // third
  BOOST_TEST(r.seen == want, "seen " << r.seen.size());
  BOOST_TEST(inf.Items().size() == 1u);
  BOOST_TEST(inf.Get("a") == nullptr);
  BOOST_REQUIRE(inf.Get("c") != nullptr);
  BOOST_TEST(inf.Get("c")->metadata.resource_version == "3");
}

// Watch events update the cache; a DELETED of something unknown (an object
// leaving a selector we never saw it in) changes nothing and tells nobody.
BOOST_AUTO_TEST_CASE(watch_events_update_the_cache) {
  poolcoord::testing::FakeLeases leases;
  Recorded r;
  LeaseInformer inf(&leases, pc::ReflectorOptions{}, [&](const std::string& type, const pc::Lease& l) {
    r.seen.emplace_back(type, l.metadata.name + "@" + l.metadata.resource_version);
  });
  inf.Apply({"ADDED", L("a", "1")});
  inf.Apply({"MODIFIED", L("a", "2")});
  inf.Apply({"MODIFIED", L("b", "3")});  // first sight through a MODIFIED: ADDED to us
  inf.Apply({"DELETED", L("z", "4")});
  inf.Apply({"BOOKMARK", L("", "5")});
  inf.Apply({"DELETED", L("a", "6")});
  const std::vector<std::pair<std::string, std::string>> want = {
      {"ADDED", "a@1"}, {"MODIFIED", "a@2"}, {"ADDED", "b@3"}, {"DELETED", "a@2"}};
  BOOST_TEST(r.seen == want, "seen " << r.seen.size());
  BOOST_TEST(inf.Get("b")->metadata.resource_version == "3");
}

// The handler runs outside the cache's lock: it may read the cache (a
// controller's handler looks at other objects), and what it reads already
// holds the change it is told of.
BOOST_AUTO_TEST_CASE(the_handler_may_read_the_cache) {
  poolcoord::testing::FakeLeases leases;
  std::vector<std::string> read;
  LeaseInformer* self = nullptr;
  LeaseInformer inf(&leases, pc::ReflectorOptions{}, [&](const std::string&, const pc::Lease& l) {
    auto got = self->Get(l.metadata.name);
    read.push_back(got ? got->metadata.resource_version : "none");
  });
  self = &inf;
  inf.Apply({"ADDED", L("a", "1")});
  inf.Apply({"DELETED", L("a", "1")});
  BOOST_TEST((read == std::vector<std::string>{"1", "none"}));
}
