// The in-pool heartbeat datagram, as the agent names it. The codec lives in
// election/heartbeat.h (the server checks forwarded heartbeats with it, and
// election/ is below both processes); this header re-exports it into
// poolcoord::agent so the agent's code and tests read as before.
#pragma once

#include "election/heartbeat.h"

namespace poolcoord::agent {

using election::kBootIdBytes;
using election::kFingerprintBytes;
using election::kHeaderBytes;
using election::kMagic;
using election::kMaxCertificateDatagramBytes;
using election::kMaxCertificateDerBytes;
using election::kMaxChallengeBytes;
using election::kMaxDatagramBytes;
using election::kMaxNodeNameBytes;
using election::kMaxPoolNameBytes;
using election::kMaxSignatureBytes;
using election::kWireVersion;

using election::BootId;
using election::CertificateRequest;
using election::Datagram;
using election::DatagramType;
using election::Fingerprint;
using election::Heartbeat;
using election::SignedHeartbeat;

using election::BootIdHex;
using election::DecodeDatagram;
using election::DecodeHeartbeatBody;
using election::EncodeCertificateDatagram;
using election::EncodeCertificateRequest;
using election::EncodeHeartbeatBody;
using election::EncodeHeartbeatDatagram;
using election::FingerprintHex;
using election::ValidNodeName;
using election::ValidPoolName;

}  // namespace poolcoord::agent
