// What an agent knows of its pool: its own node, the pool's name, and each
// member's address on the pool LAN (the InternalIP of each Node carrying the
// pool label; in the simulator, a modelled address).
//
// Thread-safety: a value; share it as std::shared_ptr<const PoolView> and
// replace it wholesale.
#pragma once

#include <map>
#include <string>

namespace poolcoord::agent {

struct PoolView {
  std::string pool;  // "hangzhou"
  std::string self;  // this agent's node, "hz-1"
  // Every member, self included: node name -> LAN address ("10.0.0.7").
  std::map<std::string, std::string> members;

  bool IsMember(const std::string& node) const { return members.count(node) != 0; }
  // "" when the node is not a member.
  const std::string& AddressOf(const std::string& node) const {
    static const std::string kNone;
    auto it = members.find(node);
    return it == members.end() ? kNone : it->second;
  }
  bool operator==(const PoolView&) const = default;
};

}  // namespace poolcoord::agent
