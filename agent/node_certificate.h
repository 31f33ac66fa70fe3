// Node identities as the agent names them. The checks live in
// election/node_certificate.h (the server's proof check makes the same ones);
// this header re-exports them into poolcoord::agent.
#pragma once

#include "agent/heartbeat.h"
#include "election/node_certificate.h"

namespace poolcoord::agent {

using election::kModelledSignatureOrganization;
using election::kNodesGroup;
using election::kNodeUserPrefix;

using election::CertificateAuthority;
using election::CertificateAuthorityOptions;
using election::CertificateError;
using election::CertificateErrorName;
using election::CertificateFingerprint;
using election::KeyType;
using election::NodeCertificate;
using election::NodeIdentity;

}  // namespace poolcoord::agent
