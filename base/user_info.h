// The authenticated requester, as k8s.io/apiserver's user.Info has it.
#pragma once

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace poolcoord::base {

struct UserInfo {
  std::string username;  // "system:node:hz-1", "system:anonymous"
  std::string uid;
  std::vector<std::string> groups;  // includes "system:authenticated" when authenticated
  std::map<std::string, std::vector<std::string>> extra;

  bool InGroup(const std::string& group) const {
    return std::find(groups.begin(), groups.end(), group) != groups.end();
  }
  bool IsMaster() const { return InGroup("system:masters"); }
  // The node name when this is a node identity ("system:node:<name>" in group
  // system:nodes, as the Node authorizer requires), else "".
  std::string NodeName() const {
    static const std::string kPrefix = "system:node:";
    if (username.rfind(kPrefix, 0) != 0 || !InGroup("system:nodes")) return "";
    return username.substr(kPrefix.size());
  }
};

}  // namespace poolcoord::base
