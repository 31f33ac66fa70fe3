// Certificates minted in memory (tests, simulator, benchmarks): see
// election/minted_pki.h, re-exported here into poolcoord::agent.
#pragma once

#include "agent/node_certificate.h"
#include "election/minted_pki.h"

namespace poolcoord::agent {

using election::MintCertificate;
using election::MintCertificateAuthority;
using election::MintedKeyPair;
using election::MintNodeCertificate;
using election::MintOptions;

}  // namespace poolcoord::agent
