// kubectl-pool: the kubectl plugin that shows poolcoord's pools (`kubectl pool`,
// `kubectl pool describe POOL`). kubectl runs any executable named kubectl-pool
// on PATH with the arguments after "pool"; see kubectl-pool/command.h.
#include <iostream>
#include <string>
#include <vector>

#include "kubectl-pool/command.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return poolcoord::kubectl_pool::Run(args, {}, std::cout, std::cerr);
}
