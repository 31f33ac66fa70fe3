#define BOOST_TEST_MODULE heartbeat_codec
#include <boost/test/unit_test.hpp>

#include <string>

#include "agent/heartbeat.h"
#include "tests/agent/agent_testing.h"

namespace pa = poolcoord::agent;

namespace {

pa::Heartbeat Sample() {
  pa::Heartbeat hb;
  hb.node = "hz-2";
  hb.pool = "hangzhou";
  hb.boot_id.fill(0xab);
  hb.sequence = 0x0102030405060708ULL;
  hb.cloud_reachable = false;
  hb.leader = true;
  hb.challenge = "c2VydmVyLWNoYWxsZW5nZQ==";
  hb.sent_wall_us = 1'767'225'600'123'456;
  hb.certificate_fingerprint.fill(0x5a);
  return hb;
}

std::string SampleDatagram(const std::string& signature = std::string(72, 's')) {
  auto body = pa::EncodeHeartbeatBody(Sample());
  BOOST_REQUIRE(body.ok());
  auto d = pa::EncodeHeartbeatDatagram(*body, signature);
  BOOST_REQUIRE(d.ok());
  return *d;
}

absl::StatusCode CodeOf(const std::string& bytes) { return pa::DecodeDatagram(bytes).status().code(); }

// Offsets in a heartbeat (heartbeat.h's layout).
constexpr size_t kVersionAt = 4, kTypeAt = 5, kFlagsAt = 6, kNodeLenAt = 7, kPoolLenAt = 8,
                 kChallengeLenAt = 9, kSequenceAt = 10;

}  // namespace

BOOST_AUTO_TEST_CASE(HeartbeatRoundTrip) {
  const std::string sig(72, 's');
  auto body = pa::EncodeHeartbeatBody(Sample());
  BOOST_REQUIRE(body.ok());
  const std::string datagram = SampleDatagram(sig);
  auto d = pa::DecodeDatagram(datagram);
  BOOST_REQUIRE_MESSAGE(d.ok(), d.status().ToString());
  BOOST_TEST(static_cast<int>(d->type) == static_cast<int>(pa::DatagramType::kHeartbeat));
  BOOST_TEST(d->heartbeat.heartbeat == Sample());
  // The signed part is exactly the body; what a proof forwards decodes alone.
  BOOST_TEST(d->heartbeat.signed_bytes == *body);
  BOOST_TEST(d->heartbeat.signature == sig);
  auto alone = pa::DecodeHeartbeatBody(d->heartbeat.signed_bytes);
  BOOST_REQUIRE(alone.ok());
  BOOST_TEST(*alone == Sample());
  BOOST_TEST(datagram.size() == body->size() + 2 + sig.size());
}

BOOST_AUTO_TEST_CASE(FlagsAndEmptyChallenge) {
  for (int flags = 0; flags < 4; ++flags) {
    pa::Heartbeat hb = Sample();
    hb.cloud_reachable = flags & 1;
    hb.leader = flags & 2;
    hb.challenge.clear();
    auto body = pa::EncodeHeartbeatBody(hb);
    BOOST_REQUIRE(body.ok());
    auto back = pa::DecodeHeartbeatBody(*body);
    BOOST_REQUIRE(back.ok());
    BOOST_TEST(*back == hb);
    BOOST_TEST(static_cast<uint8_t>((*body)[kFlagsAt]) == flags);
  }
}

BOOST_AUTO_TEST_CASE(BigEndianSequence) {
  auto body = pa::EncodeHeartbeatBody(Sample());
  BOOST_REQUIRE(body.ok());
  for (int i = 0; i < 8; ++i) BOOST_TEST(static_cast<int>((*body)[kSequenceAt + i]) == i + 1);
}

BOOST_AUTO_TEST_CASE(LargestHeartbeatFitsTheMtu) {
  pa::Heartbeat hb = Sample();
  hb.node = std::string(63, 'a') + "." + std::string(63, 'b') + "." + std::string(63, 'c') + "." +
            std::string(61, 'd');
  BOOST_REQUIRE_EQUAL(hb.node.size(), pa::kMaxNodeNameBytes);
  hb.pool = std::string(pa::kMaxPoolNameBytes, 'p');
  hb.challenge = std::string(pa::kMaxChallengeBytes, '\xff');
  auto body = pa::EncodeHeartbeatBody(hb);
  BOOST_REQUIRE_MESSAGE(body.ok(), body.status().ToString());
  auto d = pa::EncodeHeartbeatDatagram(*body, std::string(pa::kMaxSignatureBytes, 's'));
  BOOST_REQUIRE_MESSAGE(d.ok(), d.status().ToString());
  BOOST_TEST(d->size() <= pa::kMaxDatagramBytes);
  BOOST_TEST(d->size() == 1032u);  // the header comment's "at most ~1,030 bytes"
  auto back = pa::DecodeDatagram(*d);
  BOOST_REQUIRE(back.ok());
  BOOST_TEST(back->heartbeat.heartbeat == hb);
}

BOOST_AUTO_TEST_CASE(EncodeRefusesBadFields) {
  auto bad = [](auto mutate) {
    pa::Heartbeat hb = Sample();
    mutate(hb);
    return pa::EncodeHeartbeatBody(hb).status().code();
  };
  BOOST_TEST(bad([](pa::Heartbeat& h) { h.node = ""; }) == absl::StatusCode::kInvalidArgument);
  BOOST_TEST(bad([](pa::Heartbeat& h) { h.node = "HZ-2"; }) == absl::StatusCode::kInvalidArgument);
  BOOST_TEST(bad([](pa::Heartbeat& h) { h.node = "-hz"; }) == absl::StatusCode::kInvalidArgument);
  BOOST_TEST(bad([](pa::Heartbeat& h) { h.node = "hz..2"; }) == absl::StatusCode::kInvalidArgument);
  BOOST_TEST(bad([](pa::Heartbeat& h) { h.node = std::string(254, 'a'); }) ==
             absl::StatusCode::kInvalidArgument);
  BOOST_TEST(bad([](pa::Heartbeat& h) { h.pool = ""; }) == absl::StatusCode::kInvalidArgument);
  BOOST_TEST(bad([](pa::Heartbeat& h) { h.pool = "a b"; }) == absl::StatusCode::kInvalidArgument);
  BOOST_TEST(bad([](pa::Heartbeat& h) { h.pool = std::string(64, 'p'); }) ==
             absl::StatusCode::kInvalidArgument);
  BOOST_TEST(bad([](pa::Heartbeat& h) { h.challenge = std::string(129, 'c'); }) ==
             absl::StatusCode::kInvalidArgument);
  BOOST_TEST(bad([](pa::Heartbeat& h) { h.sequence = 0; }) == absl::StatusCode::kInvalidArgument);
  auto body = pa::EncodeHeartbeatBody(Sample());
  BOOST_REQUIRE(body.ok());
  BOOST_TEST(pa::EncodeHeartbeatDatagram(*body, "").status().code() ==
             absl::StatusCode::kInvalidArgument);
  BOOST_TEST(pa::EncodeHeartbeatDatagram(*body, std::string(513, 's')).status().code() ==
             absl::StatusCode::kInvalidArgument);
  BOOST_TEST(pa::EncodeHeartbeatDatagram("junk", "sig").status().code() ==
             absl::StatusCode::kInvalidArgument);
  BOOST_TEST(pa::EncodeCertificateDatagram("").status().code() == absl::StatusCode::kInvalidArgument);
  BOOST_TEST(pa::EncodeCertificateDatagram(std::string(pa::kMaxCertificateDerBytes + 1, 'x'))
                 .status()
                 .code() == absl::StatusCode::kInvalidArgument);
  BOOST_TEST(pa::EncodeCertificateRequest({{}, "Bad"}).status().code() ==
             absl::StatusCode::kInvalidArgument);
}

BOOST_AUTO_TEST_CASE(CertificateAndRequestRoundTrip) {
  const std::string der(1200, '\x30');
  auto c = pa::EncodeCertificateDatagram(der);
  BOOST_REQUIRE(c.ok());
  auto d = pa::DecodeDatagram(*c);
  BOOST_REQUIRE(d.ok());
  BOOST_TEST(static_cast<int>(d->type) == static_cast<int>(pa::DatagramType::kCertificate));
  BOOST_TEST(d->certificate_der == der);

  pa::CertificateRequest req;
  req.fingerprint.fill(7);
  req.node = "hz-3";
  auto r = pa::EncodeCertificateRequest(req);
  BOOST_REQUIRE(r.ok());
  auto back = pa::DecodeDatagram(*r);
  BOOST_REQUIRE(back.ok());
  BOOST_TEST(static_cast<int>(back->type) == static_cast<int>(pa::DatagramType::kCertificateRequest));
  BOOST_TEST(back->request.node == "hz-3");
  BOOST_TEST(back->request.fingerprint == req.fingerprint);
  // The largest certificate datagram decodes; one byte more is oversized.
  auto largest = pa::EncodeCertificateDatagram(std::string(pa::kMaxCertificateDerBytes, 'x'));
  BOOST_REQUIRE(largest.ok());
  BOOST_TEST(largest->size() == pa::kMaxCertificateDatagramBytes);
  BOOST_TEST(pa::DecodeDatagram(*largest).ok());
  BOOST_TEST(CodeOf(*largest + "x") == absl::StatusCode::kOutOfRange);
}

BOOST_AUTO_TEST_CASE(EveryTruncationIsMalformed) {
  const std::string full = SampleDatagram();
  for (size_t n = 0; n < full.size(); ++n) {
    BOOST_TEST_CONTEXT("prefix of " << n << " bytes") {
      BOOST_TEST(CodeOf(full.substr(0, n)) == absl::StatusCode::kInvalidArgument);
    }
  }
  auto c = pa::EncodeCertificateDatagram(std::string(100, 'x'));
  auto r = pa::EncodeCertificateRequest({{}, "hz-3"});
  for (const std::string& other : {*c, *r}) {
    for (size_t n = 0; n < other.size(); ++n) {
      BOOST_TEST(CodeOf(other.substr(0, n)) == absl::StatusCode::kInvalidArgument);
    }
  }
}

BOOST_AUTO_TEST_CASE(TrailingBytesAreMalformed) {
  BOOST_TEST(CodeOf(SampleDatagram() + "x") == absl::StatusCode::kInvalidArgument);
  auto c = pa::EncodeCertificateDatagram(std::string(100, 'x'));
  BOOST_TEST(CodeOf(*c + "x") == absl::StatusCode::kInvalidArgument);
  auto r = pa::EncodeCertificateRequest({{}, "hz-3"});
  BOOST_TEST(CodeOf(*r + "x") == absl::StatusCode::kInvalidArgument);
  auto body = pa::EncodeHeartbeatBody(Sample());
  BOOST_TEST(pa::DecodeHeartbeatBody(*body + "x").status().code() ==
             absl::StatusCode::kInvalidArgument);
}

BOOST_AUTO_TEST_CASE(HeaderErrors) {
  std::string d = SampleDatagram();
  std::string bad_magic = d;
  bad_magic[0] = 'X';
  BOOST_TEST(CodeOf(bad_magic) == absl::StatusCode::kInvalidArgument);
  std::string v2 = d;
  v2[kVersionAt] = 2;
  BOOST_TEST(CodeOf(v2) == absl::StatusCode::kUnimplemented);
  std::string v0 = d;
  v0[kVersionAt] = 0;
  BOOST_TEST(CodeOf(v0) == absl::StatusCode::kUnimplemented);
  for (int t : {0, 4, 255}) {
    std::string bad_type = d;
    bad_type[kTypeAt] = static_cast<char>(t);
    BOOST_TEST(CodeOf(bad_type) == absl::StatusCode::kUnimplemented);
  }
  BOOST_TEST(CodeOf("") == absl::StatusCode::kInvalidArgument);
  BOOST_TEST(CodeOf("PCHB") == absl::StatusCode::kInvalidArgument);
  BOOST_TEST(CodeOf(std::string("PCHB\x01", 5)) == absl::StatusCode::kInvalidArgument);
  // A certificate body is not a heartbeat body.
  auto c = pa::EncodeCertificateDatagram("x");
  BOOST_TEST(pa::DecodeHeartbeatBody(*c).status().code() == absl::StatusCode::kInvalidArgument);
}

BOOST_AUTO_TEST_CASE(FieldErrors) {
  const std::string d = SampleDatagram();
  auto with = [&](size_t at, uint8_t value) {
    std::string m = d;
    m[at] = static_cast<char>(value);
    return CodeOf(m);
  };
  for (uint8_t flags : {0x04, 0x80, 0xff}) {
    BOOST_TEST(with(kFlagsAt, flags) == absl::StatusCode::kInvalidArgument);
  }
  BOOST_TEST(with(kChallengeLenAt, 129) == absl::StatusCode::kInvalidArgument);
  BOOST_TEST(with(kChallengeLenAt, 255) == absl::StatusCode::kInvalidArgument);
  BOOST_TEST(with(kNodeLenAt, 0) == absl::StatusCode::kInvalidArgument);
  BOOST_TEST(with(kNodeLenAt, 255) == absl::StatusCode::kInvalidArgument);
  BOOST_TEST(with(kPoolLenAt, 0) == absl::StatusCode::kInvalidArgument);
  // Sequence 0 never comes from an agent.
  std::string zero = d;
  for (int i = 0; i < 8; ++i) zero[kSequenceAt + i] = 0;
  BOOST_TEST(CodeOf(zero) == absl::StatusCode::kInvalidArgument);
  // A node name with a character a Node name cannot have.
  std::string upper = d;
  const size_t node_at = d.find("hz-2");
  upper[node_at] = 'H';
  BOOST_TEST(CodeOf(upper) == absl::StatusCode::kInvalidArgument);
  std::string nul = d;
  nul[node_at + 1] = '\0';
  BOOST_TEST(CodeOf(nul) == absl::StatusCode::kInvalidArgument);
  // Signature length 0, over the bound, past the end.
  const size_t sig_len_at = d.size() - 72 - 2;
  auto sig_len = [&](uint16_t n) {
    std::string m = d;
    m[sig_len_at] = static_cast<char>(n >> 8);
    m[sig_len_at + 1] = static_cast<char>(n & 0xff);
    return CodeOf(m);
  };
  BOOST_TEST(sig_len(72) == absl::StatusCode::kOk);
  BOOST_TEST(sig_len(0) == absl::StatusCode::kInvalidArgument);
  BOOST_TEST(sig_len(513) == absl::StatusCode::kInvalidArgument);
  BOOST_TEST(sig_len(73) == absl::StatusCode::kInvalidArgument);
  BOOST_TEST(sig_len(71) == absl::StatusCode::kInvalidArgument);
  // A certificate datagram with length 0; a request naming a bad node.
  BOOST_TEST(CodeOf(std::string("PCHB\x01\x02\x00\x00", 8)) == absl::StatusCode::kInvalidArgument);
  std::string req = std::string("PCHB\x01\x03", 6) + std::string(32, '\0') + "\x02" + "A!";
  BOOST_TEST(CodeOf(req) == absl::StatusCode::kInvalidArgument);
}

BOOST_AUTO_TEST_CASE(Oversized) {
  // A heartbeat (or request) longer than the MTU bound, whatever it holds.
  std::string big = SampleDatagram() + std::string(pa::kMaxDatagramBytes, 'x');
  BOOST_TEST(CodeOf(big) == absl::StatusCode::kOutOfRange);
  std::string exactly = SampleDatagram();
  exactly.resize(pa::kMaxDatagramBytes + 1, 'x');
  BOOST_TEST(CodeOf(exactly) == absl::StatusCode::kOutOfRange);
  BOOST_TEST(CodeOf(std::string(70'000, 'x')) == absl::StatusCode::kOutOfRange);
  std::string req = *pa::EncodeCertificateRequest({{}, "hz-3"});
  req.resize(pa::kMaxDatagramBytes + 1, 'x');
  BOOST_TEST(CodeOf(req) == absl::StatusCode::kOutOfRange);
  BOOST_TEST(pa::DecodeHeartbeatBody(std::string(1401, 'x')).status().code() ==
             absl::StatusCode::kOutOfRange);
}

BOOST_AUTO_TEST_CASE(NameRules) {
  BOOST_TEST(pa::ValidNodeName("hz-1"));
  BOOST_TEST(pa::ValidNodeName("ip-10-0-0-1.ec2.internal"));
  BOOST_TEST(pa::ValidNodeName("1"));
  BOOST_TEST(!pa::ValidNodeName(""));
  BOOST_TEST(!pa::ValidNodeName("a."));
  BOOST_TEST(!pa::ValidNodeName(".a"));
  BOOST_TEST(!pa::ValidNodeName("a-"));
  BOOST_TEST(!pa::ValidNodeName("a_b"));
  BOOST_TEST(!pa::ValidNodeName(std::string(64, 'a')));  // one label over 63
  BOOST_TEST(pa::ValidPoolName("Hangzhou_1.a-b"));
  BOOST_TEST(!pa::ValidPoolName("_x"));
  BOOST_TEST(!pa::ValidPoolName("x/"));
}

BOOST_AUTO_TEST_CASE(Hex) {
  pa::BootId b{};
  b[0] = 0x0f;
  b[15] = 0xa0;
  BOOST_TEST(pa::BootIdHex(b) == "0f0000000000000000000000000000a0");
}
