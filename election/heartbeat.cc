#include "election/heartbeat.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace poolcoord::election {
namespace {

constexpr uint8_t kFlagCloudReachable = 0x01;
constexpr uint8_t kFlagLeader = 0x02;
constexpr uint8_t kKnownFlags = kFlagCloudReachable | kFlagLeader;
// flags, three lengths, sequence, sent_wall_us, boot id, fingerprint.
constexpr size_t kHeartbeatFixedBytes = kHeaderBytes + 4 + 8 + 8 + kBootIdBytes + kFingerprintBytes;

void PutU16(std::string* out, uint16_t v) {
  out->push_back(static_cast<char>(v >> 8));
  out->push_back(static_cast<char>(v & 0xff));
}

void PutU64(std::string* out, uint64_t v) {
  for (int shift = 56; shift >= 0; shift -= 8) out->push_back(static_cast<char>((v >> shift) & 0xff));
}

void PutHeader(std::string* out, DatagramType type) {
  out->append(kMagic, sizeof(kMagic));
  out->push_back(static_cast<char>(kWireVersion));
  out->push_back(static_cast<char>(type));
}

// A bounds-checked cursor over untrusted bytes.
class Reader {
 public:
  explicit Reader(absl::string_view bytes) : data_(bytes) {}
  bool U8(uint8_t* v) {
    if (data_.size() - pos_ < 1) return false;
    *v = static_cast<uint8_t>(data_[pos_++]);
    return true;
  }
  bool U16(uint16_t* v) {
    if (data_.size() - pos_ < 2) return false;
    *v = static_cast<uint16_t>((Byte(0) << 8) | Byte(1));
    pos_ += 2;
    return true;
  }
  bool U64(uint64_t* v) {
    if (data_.size() - pos_ < 8) return false;
    uint64_t r = 0;
    for (size_t i = 0; i < 8; ++i) r = (r << 8) | Byte(i);
    pos_ += 8;
    *v = r;
    return true;
  }
  bool Bytes(size_t n, absl::string_view* out) {
    if (data_.size() - pos_ < n) return false;
    *out = data_.substr(pos_, n);
    pos_ += n;
    return true;
  }
  template <size_t N>
  bool Array(std::array<uint8_t, N>* out) {
    absl::string_view b;
    if (!Bytes(N, &b)) return false;
    std::memcpy(out->data(), b.data(), N);
    return true;
  }
  size_t pos() const { return pos_; }
  bool AtEnd() const { return pos_ == data_.size(); }

 private:
  uint64_t Byte(size_t i) const { return static_cast<uint8_t>(data_[pos_ + i]); }
  absl::string_view data_;
  size_t pos_ = 0;
};

absl::Status Malformed(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("malformed datagram: ", what));
}

// Reads the header; sets *type. The magic decides "ours at all" (InvalidArgument),
// then version and type (Unimplemented), so a future version is told apart from
// garbage in the drop counters.
absl::Status ReadHeader(Reader* r, DatagramType* type) {
  absl::string_view magic;
  if (!r->Bytes(sizeof(kMagic), &magic) || magic != absl::string_view(kMagic, sizeof(kMagic))) {
    return Malformed("not a poolcoord heartbeat (bad magic)");
  }
  uint8_t version = 0, t = 0;
  if (!r->U8(&version) || !r->U8(&t)) return Malformed("short header");
  if (version != kWireVersion) {
    return absl::UnimplementedError(absl::StrCat("unsupported heartbeat version ", version,
                                                 " (this agent speaks ", kWireVersion, ")"));
  }
  if (t < static_cast<uint8_t>(DatagramType::kHeartbeat) ||
      t > static_cast<uint8_t>(DatagramType::kCertificateRequest)) {
    return absl::UnimplementedError(absl::StrCat("unknown datagram type ", t));
  }
  *type = static_cast<DatagramType>(t);
  return absl::OkStatus();
}

// The heartbeat fields after the header; leaves r after the challenge.
absl::Status ReadHeartbeatFields(Reader* r, Heartbeat* hb) {
  uint8_t flags = 0, node_len = 0, pool_len = 0, challenge_len = 0;
  uint64_t sequence = 0, sent = 0;
  if (!r->U8(&flags) || !r->U8(&node_len) || !r->U8(&pool_len) || !r->U8(&challenge_len) ||
      !r->U64(&sequence) || !r->U64(&sent) || !r->Array(&hb->boot_id) ||
      !r->Array(&hb->certificate_fingerprint)) {
    return Malformed("short heartbeat");
  }
  if ((flags & ~kKnownFlags) != 0) return Malformed("unknown flag bits");
  if (challenge_len > kMaxChallengeBytes) return Malformed("challenge too long");
  absl::string_view node, pool, challenge;
  if (!r->Bytes(node_len, &node) || !r->Bytes(pool_len, &pool) ||
      !r->Bytes(challenge_len, &challenge)) {
    return Malformed("names run past the end");
  }
  if (!ValidNodeName(node)) return Malformed("invalid node name");
  if (!ValidPoolName(pool)) return Malformed("invalid pool name");
  if (sequence == 0) return Malformed("sequence 0");
  hb->node.assign(node.data(), node.size());
  hb->pool.assign(pool.data(), pool.size());
  hb->challenge.assign(challenge.data(), challenge.size());
  hb->sequence = sequence;
  hb->sent_wall_us = static_cast<int64_t>(sent);
  hb->cloud_reachable = (flags & kFlagCloudReachable) != 0;
  hb->leader = (flags & kFlagLeader) != 0;
  return absl::OkStatus();
}

absl::Status Oversized(size_t size, size_t limit) {
  return absl::OutOfRangeError(
      absl::StrCat("datagram of ", size, " bytes exceeds the limit of ", limit));
}

bool AlnumLower(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool Alnum(char c) { return AlnumLower(c) || (c >= 'A' && c <= 'Z'); }

}  // namespace

bool ValidNodeName(absl::string_view name) {
  if (name.empty() || name.size() > kMaxNodeNameBytes) return false;
  // Dot-separated RFC 1123 labels: [a-z0-9]([-a-z0-9]*[a-z0-9])?
  size_t start = 0;
  while (start <= name.size()) {
    size_t end = name.find('.', start);
    if (end == absl::string_view::npos) end = name.size();
    absl::string_view label = name.substr(start, end - start);
    if (label.empty() || label.size() > 63 || !AlnumLower(label.front()) ||
        !AlnumLower(label.back())) {
      return false;
    }
    for (char c : label) {
      if (!AlnumLower(c) && c != '-') return false;
    }
    start = end + 1;
  }
  return true;
}

bool ValidPoolName(absl::string_view name) {
  // A label value: (([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?, here non-empty.
  if (name.empty() || name.size() > kMaxPoolNameBytes) return false;
  if (!Alnum(name.front()) || !Alnum(name.back())) return false;
  for (char c : name) {
    if (!Alnum(c) && c != '-' && c != '_' && c != '.') return false;
  }
  return true;
}

absl::StatusOr<std::string> EncodeHeartbeatBody(const Heartbeat& hb) {
  if (!ValidNodeName(hb.node)) {
    return absl::InvalidArgumentError(absl::StrCat("invalid node name \"", hb.node, "\""));
  }
  if (!ValidPoolName(hb.pool)) {
    return absl::InvalidArgumentError(absl::StrCat("invalid pool name \"", hb.pool, "\""));
  }
  if (hb.challenge.size() > kMaxChallengeBytes) {
    return absl::InvalidArgumentError(absl::StrCat("challenge of ", hb.challenge.size(),
                                                   " bytes exceeds ", kMaxChallengeBytes));
  }
  if (hb.sequence == 0) return absl::InvalidArgumentError("sequence numbers start at 1");
  std::string out;
  out.reserve(kHeartbeatFixedBytes + hb.node.size() + hb.pool.size() + hb.challenge.size() + 2 +
              kMaxSignatureBytes);
  PutHeader(&out, DatagramType::kHeartbeat);
  uint8_t flags = (hb.cloud_reachable ? kFlagCloudReachable : 0) | (hb.leader ? kFlagLeader : 0);
  out.push_back(static_cast<char>(flags));
  out.push_back(static_cast<char>(hb.node.size()));
  out.push_back(static_cast<char>(hb.pool.size()));
  out.push_back(static_cast<char>(hb.challenge.size()));
  PutU64(&out, hb.sequence);
  PutU64(&out, static_cast<uint64_t>(hb.sent_wall_us));
  out.append(reinterpret_cast<const char*>(hb.boot_id.data()), hb.boot_id.size());
  out.append(reinterpret_cast<const char*>(hb.certificate_fingerprint.data()),
             hb.certificate_fingerprint.size());
  out += hb.node;
  out += hb.pool;
  out += hb.challenge;
  return out;
}

absl::StatusOr<std::string> EncodeHeartbeatDatagram(absl::string_view body,
                                                    absl::string_view signature) {
  if (signature.empty() || signature.size() > kMaxSignatureBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("signature of ", signature.size(), " bytes (1..", kMaxSignatureBytes, ")"));
  }
  auto decoded = DecodeHeartbeatBody(body);
  if (!decoded.ok()) return decoded.status();
  std::string out;
  out.reserve(body.size() + 2 + signature.size());
  out.append(body.data(), body.size());
  PutU16(&out, static_cast<uint16_t>(signature.size()));
  out.append(signature.data(), signature.size());
  if (out.size() > kMaxDatagramBytes) return Oversized(out.size(), kMaxDatagramBytes);
  return out;
}

absl::StatusOr<std::string> EncodeCertificateDatagram(absl::string_view der) {
  if (der.empty() || der.size() > kMaxCertificateDerBytes) {
    return absl::InvalidArgumentError(absl::StrCat("certificate of ", der.size(),
                                                   " bytes (1..", kMaxCertificateDerBytes, ")"));
  }
  std::string out;
  out.reserve(kHeaderBytes + 2 + der.size());
  PutHeader(&out, DatagramType::kCertificate);
  PutU16(&out, static_cast<uint16_t>(der.size()));
  out.append(der.data(), der.size());
  return out;
}

absl::StatusOr<std::string> EncodeCertificateRequest(const CertificateRequest& request) {
  if (!ValidNodeName(request.node)) {
    return absl::InvalidArgumentError(absl::StrCat("invalid node name \"", request.node, "\""));
  }
  std::string out;
  PutHeader(&out, DatagramType::kCertificateRequest);
  out.append(reinterpret_cast<const char*>(request.fingerprint.data()), request.fingerprint.size());
  out.push_back(static_cast<char>(request.node.size()));
  out += request.node;
  return out;
}

absl::StatusOr<Heartbeat> DecodeHeartbeatBody(absl::string_view body) {
  if (body.size() > kMaxDatagramBytes) return Oversized(body.size(), kMaxDatagramBytes);
  Reader r(body);
  DatagramType type;
  if (absl::Status s = ReadHeader(&r, &type); !s.ok()) return s;
  if (type != DatagramType::kHeartbeat) return Malformed("not a heartbeat");
  Heartbeat hb;
  if (absl::Status s = ReadHeartbeatFields(&r, &hb); !s.ok()) return s;
  if (!r.AtEnd()) return Malformed("trailing bytes after the signed part");
  return hb;
}

absl::StatusOr<Datagram> DecodeDatagram(absl::string_view bytes) {
  // The larger limit first: the type is not known before the header is read,
  // and nothing beyond this is even looked at.
  if (bytes.size() > kMaxCertificateDatagramBytes) {
    return Oversized(bytes.size(), kMaxCertificateDatagramBytes);
  }
  Reader r(bytes);
  Datagram d;
  if (absl::Status s = ReadHeader(&r, &d.type); !s.ok()) return s;
  if (d.type != DatagramType::kCertificate && bytes.size() > kMaxDatagramBytes) {
    return Oversized(bytes.size(), kMaxDatagramBytes);
  }
  switch (d.type) {
    case DatagramType::kHeartbeat: {
      if (absl::Status s = ReadHeartbeatFields(&r, &d.heartbeat.heartbeat); !s.ok()) return s;
      const size_t signed_end = r.pos();
      uint16_t sig_len = 0;
      absl::string_view sig;
      if (!r.U16(&sig_len)) return Malformed("missing signature");
      if (sig_len == 0 || sig_len > kMaxSignatureBytes) return Malformed("bad signature length");
      if (!r.Bytes(sig_len, &sig)) return Malformed("signature runs past the end");
      if (!r.AtEnd()) return Malformed("trailing bytes after the signature");
      d.heartbeat.signed_bytes.assign(bytes.data(), signed_end);
      d.heartbeat.signature.assign(sig.data(), sig.size());
      return d;
    }
    case DatagramType::kCertificate: {
      uint16_t len = 0;
      absl::string_view der;
      if (!r.U16(&len)) return Malformed("short certificate datagram");
      if (len == 0) return Malformed("empty certificate");
      if (!r.Bytes(len, &der)) return Malformed("certificate runs past the end");
      if (!r.AtEnd()) return Malformed("trailing bytes after the certificate");
      d.certificate_der.assign(der.data(), der.size());
      return d;
    }
    case DatagramType::kCertificateRequest: {
      uint8_t len = 0;
      absl::string_view node;
      if (!r.Array(&d.request.fingerprint) || !r.U8(&len) || !r.Bytes(len, &node)) {
        return Malformed("short certificate request");
      }
      if (!r.AtEnd()) return Malformed("trailing bytes after the certificate request");
      if (!ValidNodeName(node)) return Malformed("invalid node name");
      d.request.node.assign(node.data(), node.size());
      return d;
    }
  }
  return Malformed("unknown type");
}

namespace {
template <size_t N>
std::string Hex(const std::array<uint8_t, N>& bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * N);
  for (uint8_t b : bytes) {
    out.push_back(kDigits[b >> 4]);
    out.push_back(kDigits[b & 0xf]);
  }
  return out;
}
}  // namespace

std::string FingerprintHex(const Fingerprint& fingerprint) { return Hex(fingerprint); }
std::string BootIdHex(const BootId& boot_id) { return Hex(boot_id); }

}  // namespace poolcoord::election
