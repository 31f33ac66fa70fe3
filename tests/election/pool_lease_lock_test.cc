#define BOOST_TEST_MODULE pool_lease_lock
#include "election/pool_lease_lock.h"

#include <boost/test/unit_test.hpp>
#include <string>

#include "cloud/codec.h"
#include "cloud/errors.h"
#include "tests/cloud_fakes.h"

namespace pe = poolcoord::election;
namespace pc = poolcoord::cloud;

namespace {

pe::LeaderElectionRecord Record(const std::string& holder, int64_t renew_us,
                                int32_t transitions = 0) {
  return {holder, 15, 1'000'000, renew_us, transitions};
}

}  // namespace

BOOST_AUTO_TEST_CASE(create_get_update_as_client_go_lease_lock) {
  poolcoord::testing::FakeLeases leases;
  pe::PoolLeaseLock lock(&leases, "hangzhou", "hz-1");
  BOOST_TEST(lock.Identity() == "hz-1");
  BOOST_TEST(lock.Describe() == "poolleases/hangzhou");
  BOOST_TEST(pc::IsNotFound(lock.Get().status()));
  auto v1 = lock.Create(Record("hz-1", 2'000'000));
  BOOST_REQUIRE(v1.ok());
  BOOST_TEST(pc::IsAlreadyExists(lock.Create(Record("hz-1", 2'000'000)).status()));
  auto got = lock.Get();
  BOOST_REQUIRE(got.ok());
  BOOST_TEST(got->version == *v1);
  BOOST_TEST((got->record == Record("hz-1", 2'000'000)));
  auto v2 = lock.Update(Record("hz-1", 3'000'000), *v1);
  BOOST_REQUIRE(v2.ok());
  BOOST_TEST(*v2 != *v1);
  // A stale version is the resourceVersion precondition failing: Conflict.
  absl::Status stale = lock.Update(Record("hz-1", 4'000'000), *v1).status();
  BOOST_TEST(pc::IsConflict(stale));
  BOOST_TEST(absl::IsAborted(stale));  // what the LeaderElector reads
}

// A PUT replaces the whole object: what others put on it (labels,
// annotations, ownerReferences) must be written back as read.
BOOST_AUTO_TEST_CASE(update_keeps_the_rest_of_the_object) {
  poolcoord::testing::FakeLeases leases;
  pc::Lease other;
  other.metadata.name = "poolcoord";
  other.metadata.labels["team"] = "edge";
  other.metadata.annotations["note"] = "kept";
  other.metadata.owner_references.push_back({"v1", "Node", "n", "u", std::nullopt, std::nullopt});
  other.spec.holder_identity = "replica-a";
  leases.Put(other);
  pe::ResourceLeaseLock lock(&leases, "leases/kube-system", "poolcoord", "replica-b");
  auto got = lock.Get();
  BOOST_REQUIRE(got.ok());
  BOOST_TEST(got->record.holder_identity == "replica-a");
  BOOST_REQUIRE(lock.Update(Record("replica-b", 5'000'000, 1), got->version).ok());
  auto stored = leases.Find("poolcoord");
  BOOST_TEST(stored->metadata.labels.at("team") == "edge");
  BOOST_TEST(stored->metadata.annotations.at("note") == "kept");
  BOOST_TEST(stored->metadata.owner_references.size() == 1u);
  BOOST_TEST(*stored->spec.holder_identity == "replica-b");
  BOOST_TEST(*stored->spec.lease_transitions == 1);
}

BOOST_AUTO_TEST_CASE(encode_for_the_simulator_round_trips) {
  const std::string json = pe::EncodePoolLease("", "p", Record("hz-2", 7'000'000, 3), "42");
  auto rec = pe::ParseLeaseRecord(json);
  BOOST_REQUIRE(rec.ok());
  BOOST_TEST(rec->version == "42");
  BOOST_TEST((rec->record == Record("hz-2", 7'000'000, 3)));
  BOOST_TEST(json.find("\"kind\":\"PoolLease\"") != std::string::npos);
  BOOST_TEST(absl::IsInvalidArgument(pe::ParseLeaseRecord("[]").status()));
}
