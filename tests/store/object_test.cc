#define BOOST_TEST_MODULE object
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "store/object.h"

namespace poolcoord::store {
namespace {

std::vector<std::pair<std::string, std::string>> Items(const StringMap& m) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [k, v] : m) out.emplace_back(k.str(), v);
  return out;
}

using Pairs = std::vector<std::pair<std::string, std::string>>;

BOOST_AUTO_TEST_SUITE(MapKeys)

BOOST_AUTO_TEST_CASE(WellKnownKeysAreSharedOthersOwned) {
  MapKey pool("coordination.pool/pool");
  MapKey delegate(std::string("openyurt.io/delegate-heartbeat"));
  MapKey other("example.com/other");
  BOOST_TEST(pool.interned());
  BOOST_TEST(delegate.interned());
  BOOST_TEST(!other.interned());
  BOOST_TEST((MapKey("coordination.pool/pool").data() == pool.data()));
  BOOST_TEST(other.view() == "example.com/other");
  BOOST_TEST(MapKey().empty());
  BOOST_TEST(MapKey("").view() == "");
}

BOOST_AUTO_TEST_CASE(CopiesAreDeepAndMovesSteal) {
  std::string text(100, 'k');
  MapKey copy;
  {
    MapKey original(text);
    copy = original;
    BOOST_TEST((copy.data() != original.data()));
    MapKey moved(std::move(original));
    BOOST_TEST(moved.view() == text);
    BOOST_TEST(original.empty());  // NOLINT: moved-from is empty by contract
  }
  BOOST_TEST(copy.view() == text);  // outlives the original
  MapKey self("self-assigned-key-longer-than-sso");
  const MapKey& alias = self;
  self = alias;
  BOOST_TEST(self.view() == "self-assigned-key-longer-than-sso");
}

BOOST_AUTO_TEST_CASE(ComparesAsStrings) {
  MapKey b("b");
  BOOST_TEST((b == "b"));
  BOOST_TEST((b == std::string("b")));
  BOOST_TEST((b == std::string_view("b")));
  BOOST_TEST((b < MapKey("c")));
  BOOST_TEST((MapKey("a") < b));
  BOOST_TEST((b < "ba"));
  BOOST_TEST(("a" < b));
  BOOST_TEST((b != "a"));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(StringMaps)

BOOST_AUTO_TEST_CASE(BehavesLikeAStdMap) {
  StringMap m;
  BOOST_TEST(m.empty());
  m["zeta"] = "z";
  m["alpha"] = "a";
  m["mid"] = "m";
  m["alpha"] += "!";
  BOOST_TEST(m.size() == 3u);
  BOOST_TEST((Items(m) == Pairs{{"alpha", "a!"}, {"mid", "m"}, {"zeta", "z"}}));
  BOOST_TEST(m.count("mid") == 1u);
  BOOST_TEST(m.count("nope") == 0u);
  BOOST_TEST(m.contains("zeta"));
  BOOST_TEST((m.find("nope") == m.end()));
  BOOST_TEST(m.find("mid")->second == "m");
  BOOST_TEST(m.at("zeta") == "z");
  BOOST_CHECK_THROW(m.at("nope"), std::out_of_range);
  const StringMap& cm = m;
  BOOST_CHECK_THROW(cm.at("nope"), std::out_of_range);

  auto [it, inserted] = m.insert({"mid", "other"});
  BOOST_TEST(!inserted);
  BOOST_TEST(it->second == "m");
  BOOST_TEST(m.emplace("beta", "b").second);
  BOOST_TEST(!m.try_emplace("beta", "x").second);
  BOOST_TEST(!m.insert_or_assign("beta", "B").second);
  BOOST_TEST(m.at("beta") == "B");
  BOOST_TEST((m.lower_bound("b")->first == "beta"));
  BOOST_TEST((m.upper_bound("beta")->first == "mid"));

  BOOST_TEST(m.erase("mid") == 1u);
  BOOST_TEST(m.erase("mid") == 0u);
  m.erase(m.find("alpha"));
  BOOST_TEST((Items(m) == Pairs{{"beta", "B"}, {"zeta", "z"}}));
  m.clear();
  BOOST_TEST(m.empty());
}

BOOST_AUTO_TEST_CASE(InitializerListKeepsTheFirstOfEqualKeys) {
  StringMap m = {{"b", "1"}, {"a", "2"}, {"b", "3"}};
  BOOST_TEST((Items(m) == Pairs{{"a", "2"}, {"b", "1"}}));
  m = {{"c", "x"}};
  BOOST_TEST((Items(m) == Pairs{{"c", "x"}}));
  std::map<std::string, std::string> reference = {{"b", "1"}, {"a", "2"}, {"b", "3"}};
  BOOST_TEST((std::map<std::string, std::string>(StringMap{{"b", "1"}, {"a", "2"}, {"b", "3"}}) ==
              reference));
}

BOOST_AUTO_TEST_CASE(FromUnsortedKeepsTheLastOfEqualKeysAndExactCapacity) {
  std::vector<StringMap::value_type> items;
  items.emplace_back("k", "first");
  items.emplace_back("a", "x");
  items.emplace_back("k", "second");
  items.emplace_back("k", "third");
  StringMap m = StringMap::FromUnsorted(std::move(items));
  BOOST_TEST((Items(m) == Pairs{{"a", "x"}, {"k", "third"}}));
  BOOST_TEST(StringMap::FromUnsorted({}).empty());
}

BOOST_AUTO_TEST_CASE(ConvertsToAndFromStdMap) {
  std::map<std::string, std::string> std_map = {{"coordination.pool/pool", "hz"}, {"a", "b"}};
  StringMap m = std_map;
  BOOST_TEST((Items(m) == Pairs{{"a", "b"}, {"coordination.pool/pool", "hz"}}));
  BOOST_TEST(m.find("coordination.pool/pool")->first.interned());
  std::map<std::string, std::string> back = m;
  BOOST_TEST((back == std_map));
  // A function taking the std::map gets a copy.
  auto size_of = [](const std::map<std::string, std::string>& x) { return x.size(); };
  BOOST_TEST(size_of(m) == 2u);
  StringMap ranged;
  ranged.insert(std_map.begin(), std_map.end());
  BOOST_TEST((ranged == m));
}

BOOST_AUTO_TEST_CASE(CopiesCompareEqualAndAreIndependent) {
  StringMap a = {{"openyurt.io/delegate-heartbeat", "true"}, {"some.long/annotation-key", "v"}};
  StringMap b = a;
  BOOST_TEST((a == b));
  b["some.long/annotation-key"] = "w";
  BOOST_TEST((a != b));
  BOOST_TEST(a.at("some.long/annotation-key") == "v");
  StringMap c = std::move(b);
  BOOST_TEST(c.at("some.long/annotation-key") == "w");
}

BOOST_AUTO_TEST_CASE(ManyKeysStaySorted) {
  StringMap m;
  std::map<std::string, std::string> reference;
  for (int i = 0; i < 500; ++i) {
    const std::string key = "key-" + std::to_string((i * 7919) % 500);
    m[key] = std::to_string(i);
    reference[key] = std::to_string(i);
  }
  for (int i = 0; i < 500; i += 3) {
    const std::string key = "key-" + std::to_string(i);
    BOOST_TEST(m.erase(key) == reference.erase(key));
  }
  BOOST_TEST((std::map<std::string, std::string>(m) == reference));
}

BOOST_AUTO_TEST_CASE(CopiesShareItemsUntilOneChanges) {
  StringMap a = {{"openyurt.io/delegate-heartbeat", "true"}, {"some.long/annotation-key", "v"}};
  StringMap b = a;
  BOOST_TEST(b.SharesItemsWith(a));
  // Reading through a const map never copies.
  const StringMap& cb = b;
  BOOST_TEST(cb.at("some.long/annotation-key") == "v");
  BOOST_TEST((cb.find("x") == cb.end()));
  for (const auto& [k, v] : cb) BOOST_TEST(!v.empty());
  BOOST_TEST(b.SharesItemsWith(a));
  b.erase("openyurt.io/delegate-heartbeat");
  BOOST_TEST(!b.SharesItemsWith(a));
  BOOST_TEST(a.size() == 2u);
  BOOST_TEST(b.size() == 1u);
}

// A reference or iterator handed out of a map stays that map's: a later copy
// does not see writes through it (the hazard of sharing on copy).
BOOST_AUTO_TEST_CASE(HandedOutReferencesNeverReachACopy) {
  StringMap m = {{"a", "1"}, {"b", "2"}};
  std::string& a = m["a"];
  StringMap copy = m;
  a = "changed";
  BOOST_TEST(copy.at("a") == "1");
  BOOST_TEST(m.at("a") == "changed");
  auto it = m.begin();
  StringMap copy2 = m;
  it->second = "again";
  BOOST_TEST(copy2.at("a") == "changed");
  StringMap copy3 = m;
  m.find("b")->second = "3";
  BOOST_TEST(copy3.at("b") == "2");
}

BOOST_AUTO_TEST_CASE(EqualSmallMapsFromTheCodecOrSetShareOneCopy) {
  auto from = [](std::vector<StringMap::value_type> items) {
    return StringMap::FromUnsorted(std::move(items));
  };
  StringMap x = from({{"test/k", "v"}, {"test/a", "b"}});
  StringMap y = from({{"test/a", "b"}, {"test/k", "v"}});
  BOOST_TEST(x.SharesItemsWith(y));
  BOOST_TEST(!x.SharesItemsWith(from({{"test/k", "w"}, {"test/a", "b"}})));
  // Set: nothing changes (or is copied) for the value already there; a change
  // takes its own copy, interned with equal maps.
  StringMap s = x;
  s.Set("test/k", "v");
  BOOST_TEST(s.SharesItemsWith(x));
  s.Set("test/k", "w");
  BOOST_TEST(x.at("test/k") == "v");
  StringMap t;
  t.Set("test/a", "b");
  t.Set("test/k", "w");
  BOOST_TEST(t.SharesItemsWith(s));
  BOOST_TEST((t == s));
  // A shared copy is never changed in place: a change through one holder copies.
  t["test/a"] = "c";
  BOOST_TEST(s.at("test/a") == "b");
  // Large maps stay with their objects.
  std::vector<StringMap::value_type> many, many2;
  for (int i = 0; i < 9; ++i) {
    many.emplace_back("test/key-" + std::to_string(i), "v");
    many2.emplace_back("test/key-" + std::to_string(i), "v");
  }
  StringMap big = from(std::move(many));
  StringMap big2 = from(std::move(many2));
  BOOST_TEST((big == big2));
  BOOST_TEST(!big.SharesItemsWith(big2));
}

BOOST_AUTO_TEST_CASE(EmptyMapsIteratorsCompareAlike) {
  StringMap e;
  auto it = e.find("x");
  BOOST_TEST((it == e.end()));
  BOOST_TEST((it == std::as_const(e).end()));
  BOOST_TEST((e.begin() == e.end()));
  BOOST_TEST(e.empty());
  e.Set("a", "b");
  BOOST_TEST(e.at("a") == "b");
}

BOOST_AUTO_TEST_CASE(ErasingAtAnIteratorOfASharedMap) {
  StringMap m = StringMap::FromUnsorted({{"test/a", "1"}, {"test/b", "2"}});
  StringMap c = m;
  const StringMap& cc = c;
  c.erase(cc.find("test/a"));
  BOOST_TEST(c.size() == 1u);
  BOOST_TEST(c.at("test/b") == "2");
  BOOST_TEST(m.size() == 2u);
}

// Maps interned, copied, changed and dropped on several threads at once (run
// by ThreadSanitizer too: scripts/check-tsan.sh).
BOOST_AUTO_TEST_CASE(ConcurrentInterningKeepsEveryMapIntact) {
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t, &wrong] {
      std::vector<StringMap> held;
      for (int i = 0; i < 5000; ++i) {
        const std::string pool = "pool-" + std::to_string((i + t) % 5);
        StringMap m;
        m.Set("coordination.pool/pool", pool);
        StringMap copy = m;
        copy.Set("test/extra", std::to_string(i % 3));
        if (m.size() != 1 || m.at("coordination.pool/pool") != pool) ++wrong;
        if (copy.size() != 2 || copy.at("test/extra") != std::to_string(i % 3)) ++wrong;
        if (i % 5 == 0) held.push_back(copy);
        if (held.size() > 16) held.erase(held.begin(), held.begin() + 8);
      }
      for (const StringMap& h : held) {
        if (h.size() != 2) ++wrong;
      }
    });
  }
  for (auto& th : threads) th.join();
  BOOST_TEST(wrong.load() == 0);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(Layout)

// One stored object is one make_shared block (Object + a 16-byte control
// block): at most 536 bytes keeps it in a 544-byte malloc chunk (labels and
// annotations one pointer each, managedFields' first entry inside; it took 640
// and then 576 before). x86-64 with libstdc++, as built here.
BOOST_AUTO_TEST_CASE(ObjectStaysSmall) {
  BOOST_TEST(sizeof(Object) <= 520u);
  BOOST_TEST(sizeof(MapKey) == 16u);
  BOOST_TEST(sizeof(StringMap) == sizeof(void*));
}

// `kind` lives in the tail padding of `status` ([[no_unique_address]]): writing
// the whole status must leave it alone.
BOOST_AUTO_TEST_CASE(AssigningStatusKeepsKind) {
  Object o;
  o.kind = Kind::kDelegatedLease;
  o.observed_monotonic_us = 42;
  o.status = LeaseStatus{};
  BOOST_TEST((o.kind == Kind::kDelegatedLease));
  LeaseStatus other;
  other.expired = true;
  other.leader_term = LeaderTerm{"uid-of-the-pool-lease-0123456789abcdef", 7};
  o.status = other;
  BOOST_TEST((o.kind == Kind::kDelegatedLease));
  o.status = std::move(other);
  BOOST_TEST((o.kind == Kind::kDelegatedLease));
  BOOST_TEST(o.status.expired);
  BOOST_TEST(o.observed_monotonic_us == 42);
  auto made = std::make_shared<Object>();
  BOOST_TEST((made->kind == Kind::kPoolLease));
  made->kind = Kind::kDelegatedLease;
  Object copy = *made;
  copy.status = o.status;
  BOOST_TEST((copy.kind == Kind::kDelegatedLease));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(Resources)

BOOST_AUTO_TEST_CASE(BuiltInKindsAndTheirWireFields) {
  const ResourceInfo& pl = InfoFor(Kind::kPoolLease);
  BOOST_TEST(std::string(pl.plural) == "poolleases");
  BOOST_TEST((pl.spec_fields & api::kSpecAcquireTime) != 0u);
  BOOST_TEST((pl.spec_fields & api::kSpecPoolName) == 0u);
  const ResourceInfo& dl = InfoFor(Kind::kDelegatedLease);
  BOOST_TEST(std::string(dl.spec_struct) == "DelegatedLeaseSpec");
  BOOST_TEST((dl.spec_fields & api::kSpecDelegate) != 0u);
  BOOST_TEST((dl.spec_fields & api::kSpecLeaseTransitions) == 0u);
  BOOST_TEST(InfoForPlural("delegatedleases") == &dl);
  BOOST_TEST(InfoForPlural("leases") == nullptr);
}

BOOST_AUTO_TEST_CASE(RegisteringAKindAboveTheStore) {
  static constexpr ResourceInfo kGadget{Kind{5}, "gadgets", "gadget", "Gadget", "gd",
                                        api::kSpecHolderIdentity, "GadgetSpec", "GadgetStatus"};
  static constexpr ResourceInfo kSameNumber{Kind{5}, "others", "other", "Other", "ot", 0, "", ""};
  static constexpr ResourceInfo kSamePlural{Kind{4}, "poolleases", "x", "X", "x", 0, "", ""};
  static constexpr ResourceInfo kTooFar{Kind{kMaxKinds}, "far", "far", "Far", "f", 0, "", ""};
  BOOST_TEST(InfoForPlural("gadgets") == nullptr);
  BOOST_TEST(RegisterResource(&kGadget));
  BOOST_TEST(RegisterResource(&kGadget));  // again: a no-op
  BOOST_TEST(&InfoFor(Kind{5}) == &kGadget);
  BOOST_TEST(InfoForPlural("gadgets") == &kGadget);
  BOOST_TEST(!RegisterResource(&kSameNumber));
  BOOST_TEST(!RegisterResource(&kSamePlural));
  BOOST_TEST(!RegisterResource(&kTooFar));
  BOOST_TEST(RegisterResource(&InfoFor(Kind::kPoolLease)));  // a built-in row itself: a no-op
  BOOST_TEST(InfoForPlural("others") == nullptr);
  BOOST_TEST(&InfoFor(Kind{5}) == &kGadget);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace poolcoord::store
