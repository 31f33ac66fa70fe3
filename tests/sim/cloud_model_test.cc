// The simulator's modelled cloud (agent/sim/cloud_model.h), through the very
// typed clients the server's forwarder uses: kube-apiserver's answers on
// node Leases and Node taints, and the node lifecycle controller's rule that
// the verdict rests on (a renewal counts only when renewTime grows).
#define BOOST_TEST_MODULE cloud_model
#include "agent/sim/cloud_model.h"

#include <boost/test/unit_test.hpp>

#include "cloud/clientset.h"
#include "cloud/errors.h"

namespace pc = poolcoord::cloud;
using poolcoord::sim::CloudModel;

namespace {

constexpr int64_t kSecond = 1'000'000;
constexpr int64_t kT0 = 1'800'000'000 * kSecond;  // wall µs

struct Fixture {
  Fixture() : cloud({{"n1", {{"pool", "a"}}, "10.0.0.1"}, {"n2", {{"pool", "b"}}, "10.0.0.2"}}) {
    BOOST_REQUIRE(cloud.Serve(0).ok());
    pc::RestConfig cfg;
    cfg.server = "http://127.0.0.1:" + std::to_string(cloud.port());
    cfg.retry.max_attempts = 1;
    auto r = pc::RestClient::New(cfg);
    BOOST_REQUIRE(r.ok());
    rest = *std::move(r);
    clients = std::make_unique<pc::Clientset>(rest.get());
    leases = clients->Leases("kube-node-lease");
  }
  CloudModel cloud;
  std::unique_ptr<pc::RestClient> rest;
  std::unique_ptr<pc::Clientset> clients;
  pc::LeaseInterface* leases = nullptr;
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(cloud_model, Fixture)

BOOST_AUTO_TEST_CASE(leases_answer_as_kube_apiserver) {
  BOOST_TEST(pc::IsNotFound(leases->Get("n1").status()));
  cloud.KubeletRenew("n1", kT0);
  absl::StatusOr<pc::Lease> got = leases->Get("n1");
  BOOST_REQUIRE(got.ok());
  BOOST_TEST(got->spec.holder_identity.value_or("") == "n1");
  BOOST_TEST((got->spec.renew_time_us == kT0));

  pc::Lease mine = *got;
  mine.spec.renew_time_us = kT0 + 5 * kSecond;
  absl::StatusOr<pc::Lease> written = leases->Update(mine);
  BOOST_REQUIRE(written.ok());
  BOOST_TEST(written->metadata.resource_version != got->metadata.resource_version);
  // The same resourceVersion again is stale: 409 Conflict.
  BOOST_TEST(pc::IsConflict(leases->Update(mine).status()));
  // A Lease that exists cannot be created: 409 AlreadyExists.
  BOOST_TEST(pc::IsAlreadyExists(leases->Create(mine).status()));
  BOOST_TEST(cloud.server_lease_writes() == 1);

  pc::Lease fresh;
  fresh.metadata.name = "n2";
  fresh.metadata.labels["marked"] = "true";
  fresh.spec.renew_time_us = kT0;
  BOOST_REQUIRE(leases->Create(fresh).ok());
  pc::ListOptions marked;
  marked.label_selector = "marked=true";
  absl::StatusOr<pc::LeaseList> list = leases->List(marked);
  BOOST_REQUIRE(list.ok());
  BOOST_REQUIRE(list->items.size() == 1u);
  BOOST_TEST(list->items[0].metadata.name == "n2");
}

BOOST_AUTO_TEST_CASE(node_taint_patch_checks_the_resource_version) {
  absl::StatusOr<pc::Node> node = clients->Nodes()->Get("n1");
  BOOST_REQUIRE(node.ok());
  const std::string patch = R"({"metadata":{"resourceVersion":")" + node->metadata.resource_version +
                            R"("},"spec":{"taints":[{"key":"k","value":"v","effect":"NoSchedule"}]}})";
  absl::StatusOr<pc::Node> patched = clients->Nodes()->Patch("n1", pc::kMergePatch, patch);
  BOOST_REQUIRE(patched.ok());
  BOOST_REQUIRE(patched->taints.size() == 1u);
  BOOST_TEST(patched->taints[0].key == "k");
  BOOST_TEST(pc::IsConflict(clients->Nodes()->Patch("n1", pc::kMergePatch, patch).status()));
  BOOST_TEST(pc::IsNotFound(clients->Nodes()->Get("n9").status()));
}

// The node lifecycle controller counts a Lease only when its renewTime is
// later than the one it counted last: a kubelet whose clock runs behind the
// forwarder's last renewTime writes renewals that keep the node as old as it
// was.
BOOST_AUTO_TEST_CASE(only_a_growing_renew_time_is_a_sign_of_life) {
  cloud.KubeletRenew("n1", kT0);
  BOOST_REQUIRE(cloud.Changes("n1").size() == 1u);
  pc::Lease forwarded = *leases->Get("n1");
  forwarded.spec.renew_time_us = kT0 + 30 * kSecond;
  BOOST_REQUIRE(leases->Update(forwarded).ok());
  BOOST_TEST(cloud.Changes("n1").size() == 2u);
  const int64_t counted = cloud.LastChange("n1");
  cloud.KubeletRenew("n1", kT0 + 10 * kSecond);  // behind: written, not counted
  cloud.KubeletRenew("n1", kT0 + 30 * kSecond);  // equal: not counted either
  BOOST_TEST(cloud.Changes("n1").size() == 2u);
  BOOST_TEST(cloud.LastChange("n1") == counted);
  BOOST_TEST(cloud.renewals_not_counted() == 2);
  BOOST_TEST((leases->Get("n1")->spec.renew_time_us == kT0 + 30 * kSecond));
  cloud.KubeletRenew("n1", kT0 + 31 * kSecond);
  BOOST_TEST(cloud.Changes("n1").size() == 3u);
}

BOOST_AUTO_TEST_SUITE_END()
