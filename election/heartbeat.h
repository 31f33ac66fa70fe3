// The in-pool heartbeat: its fields and its datagram format (docs/agent.md
// "Wire format").
//
// Three datagram types share one header, all fields big-endian:
//
//   header (6 B)     "PCHB" | version u8 (= 1) | type u8
//   HEARTBEAT (1)    flags u8 | node_len u8 | pool_len u8 | challenge_len u8 |
//                    sequence u64 | sent_wall_us i64 | boot_id [16] |
//                    certificate_fingerprint [32] | node | pool | challenge |
//                    signature_len u16 | signature
//   CERTIFICATE (2)  der_len u16 | certificate (DER)
//   CERT_REQUEST (3) fingerprint [32] | node_len u8 | node  (the requester)
//
// A heartbeat's signature covers every byte before signature_len (header
// included): those bytes plus the signature plus the sender's certificate are a
// self-contained proof that a verifier elsewhere (the server's lease rules,
// election/delegation_proof.h) can check with nothing but the cluster CA. That is
// why this codec lives in election/ (below both the agent and the server) and
// agent/heartbeat.h re-exports it. The "PCHB" prefix keeps the signed bytes apart
// from anything else the node's key signs (a TLS 1.3 CertificateVerify starts
// with 64 spaces, a TLS 1.2 one with the client random).
//
// Why the certificate travels in its own datagram (a certificate cache) rather
// than in every heartbeat:
// - size: a kubelet certificate is 600–1,300 bytes of DER (an RSA 2048 key signed
//   by an RSA 2048 CA is about 1,000; an RSA 4096 CA adds 256 more), and an RSA
//   signature another 256–512: with the heartbeat's own ~130 bytes plus names, the
//   RSA cases do not stay under a 1,400-byte MTU. A heartbeat that names its
//   certificate by SHA-256 fingerprint is at most ~1,030 bytes (RSA 4096, longest
//   names and challenge) and ~220 bytes typically, and never fragments;
// - cost: verifying a chain costs as much as the heartbeat's signature again;
//   receivers verify each certificate once, then look it up by fingerprint;
// - the fingerprint is inside the signed bytes, so a heartbeat is bound to the one
//   certificate it names (a forwarded proof carries exactly that certificate).
// A sender pushes its CERTIFICATE to each peer with its first heartbeats, after
// its certificate changes, and periodically (receivers that restarted), and
// answers a CERT_REQUEST from a pool member that saw an unknown fingerprint — sent
// to that member's known address, never to the datagram's source, so a spoofed
// request cannot reflect certificates at a third party. A CERTIFICATE datagram is
// not signed: a certificate is checked against the cluster CA on its own merit.
// It may exceed the MTU (up to kMaxCertificateDatagramBytes, IP fragments on the
// pool LAN), as it is sent rarely and re-requested when lost.
//
// Thread-safety: plain functions and values.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace poolcoord::election {

inline constexpr char kMagic[4] = {'P', 'C', 'H', 'B'};
inline constexpr uint8_t kWireVersion = 1;
inline constexpr size_t kHeaderBytes = 6;
// Heartbeats and certificate requests; anything longer is dropped as oversized.
inline constexpr size_t kMaxDatagramBytes = 1400;
inline constexpr size_t kMaxCertificateDatagramBytes = 4096;
inline constexpr size_t kMaxCertificateDerBytes = kMaxCertificateDatagramBytes - kHeaderBytes - 2;
// A Node name is a DNS subdomain; a pool name a label value; the challenge is
// whatever the server issues (base64 of 32 random bytes is 44).
inline constexpr size_t kMaxNodeNameBytes = 253;
inline constexpr size_t kMaxPoolNameBytes = 63;
inline constexpr size_t kMaxChallengeBytes = 128;
// RSA 4096 is the largest key accepted (node_certificate.h).
inline constexpr size_t kMaxSignatureBytes = 512;
inline constexpr size_t kBootIdBytes = 16;
inline constexpr size_t kFingerprintBytes = 32;

enum class DatagramType : uint8_t {
  kHeartbeat = 1,
  kCertificate = 2,
  kCertificateRequest = 3,
};

using BootId = std::array<uint8_t, kBootIdBytes>;
// SHA-256 of the certificate's DER.
using Fingerprint = std::array<uint8_t, kFingerprintBytes>;

struct Heartbeat {
  std::string node;  // the sender, "hz-1" (its certificate names system:node:hz-1)
  std::string pool;  // the sender's pool, as its own Node label says
  // Random per agent start (the agent's boot, not the kernel's): sequence
  // numbers restart at 1 with each one, so nothing has to survive a restart.
  BootId boot_id{};
  uint64_t sequence = 0;  // 1, 2, ... per boot id; one per heartbeat round
  bool cloud_reachable = false;  // "the cloud sees me" (docs/agent.md)
  // The sender holds its pool's PoolLease; its challenge is then the one the
  // server issued, which members adopt.
  bool leader = false;
  std::string challenge;  // the latest challenge heard; "" before the first
  // The sender's wall clock when it signed: informational (logs, proofs), never
  // used to judge freshness.
  int64_t sent_wall_us = 0;
  Fingerprint certificate_fingerprint{};

  bool operator==(const Heartbeat&) const = default;
};

// A heartbeat as received: the exact signed bytes and signature, kept so the
// leader can forward them as a proof.
struct SignedHeartbeat {
  Heartbeat heartbeat;
  std::string signed_bytes;
  std::string signature;
};

struct CertificateRequest {
  Fingerprint fingerprint{};  // the certificate wanted
  std::string node;           // the requester, a member of the responder's pool
};

// One decoded datagram; which member is set follows `type`.
struct Datagram {
  DatagramType type = DatagramType::kHeartbeat;
  SignedHeartbeat heartbeat;          // kHeartbeat
  std::string certificate_der;        // kCertificate
  CertificateRequest request;         // kCertificateRequest
};

// The signed part of a heartbeat. InvalidArgument when a field is out of its
// bounds (empty or too long a name, a name with characters a Node name or label
// value cannot have, a challenge over kMaxChallengeBytes).
absl::StatusOr<std::string> EncodeHeartbeatBody(const Heartbeat& heartbeat);
// body + signature_len + signature. InvalidArgument for an empty or oversized
// signature, or a body that does not decode.
absl::StatusOr<std::string> EncodeHeartbeatDatagram(absl::string_view body,
                                                    absl::string_view signature);
absl::StatusOr<std::string> EncodeCertificateDatagram(absl::string_view der);
absl::StatusOr<std::string> EncodeCertificateRequest(const CertificateRequest& request);

// Decodes any datagram. Errors, each one a drop reason of the verifier:
// - OutOfRange: longer than the type allows (kMaxDatagramBytes, or
//   kMaxCertificateDatagramBytes for a certificate);
// - Unimplemented: the magic is right but the version or type is unknown;
// - InvalidArgument: anything else malformed (short, bad magic, lengths that do
//   not add up, trailing bytes, unknown flag bits, bad characters in names).
// Never reads outside `bytes`; bounded work whatever the input.
absl::StatusOr<Datagram> DecodeDatagram(absl::string_view bytes);

// Decodes only the signed part of a heartbeat (what a forwarded proof carries).
// Errors as DecodeDatagram.
absl::StatusOr<Heartbeat> DecodeHeartbeatBody(absl::string_view body);

// Node names: a DNS subdomain (RFC 1123, as Kubernetes validates Node names).
bool ValidNodeName(absl::string_view name);
// Pool names: a label value (non-empty here, since a member has one).
bool ValidPoolName(absl::string_view name);

std::string FingerprintHex(const Fingerprint& fingerprint);
std::string BootIdHex(const BootId& boot_id);

}  // namespace poolcoord::election
