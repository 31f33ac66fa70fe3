#define BOOST_TEST_MODULE node_certificate
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>

#include "agent/minted_pki.h"
#include "agent/node_certificate.h"
#include "tests/agent/agent_testing.h"

namespace pa = poolcoord::agent;
using pa::testing::MustMint;
using pa::testing::TestPki;

namespace {

int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string DerOf(const pa::MintedKeyPair& pair) {
  auto id = pa::NodeIdentity::FromPem(pair.cert_pem, pair.key_pem);
  BOOST_REQUIRE_MESSAGE(id.ok(), id.status().ToString());
  return (*id)->certificate_der();
}

std::string AnyDer(const std::string& pem) { return pa::testing::PemToDer(pem); }

pa::NodeCertificate::Result Check(const pa::MintedKeyPair& pair, int64_t at = NowUs()) {
  return pa::NodeCertificate::Verify(AnyDer(pair.cert_pem), *TestPki::Get().ca(), at);
}

pa::MintOptions NodeOptions(const std::string& node) {
  pa::MintOptions o;
  o.common_name = "system:node:" + node;
  o.organizations = {"system:nodes"};
  return o;
}

}  // namespace


BOOST_AUTO_TEST_CASE(SignAndVerifyBothKeyTypes) {
  for (pa::KeyType type : {pa::KeyType::kEcdsaP256, pa::KeyType::kRsa}) {
    const pa::NodeIdentity& id = TestPki::Get().Identity("hz-1", type);
    BOOST_TEST(id.node() == "hz-1");
    BOOST_TEST((id.key_type() == type));
    auto checked = id.VerifyAgainst(*TestPki::Get().ca(), NowUs());
    BOOST_REQUIRE_MESSAGE(checked.error == pa::CertificateError::kNone, checked.detail);
    const pa::NodeCertificate& cert = *checked.certificate;
    BOOST_TEST(cert.node() == "hz-1");
    BOOST_TEST(cert.fingerprint() == id.fingerprint());
    BOOST_TEST(cert.fingerprint() == pa::CertificateFingerprint(id.certificate_der()));

    auto sig = id.Sign("signed bytes");
    BOOST_REQUIRE(sig.ok());
    BOOST_TEST(sig->size() <= pa::kMaxSignatureBytes);
    if (type == pa::KeyType::kRsa) BOOST_TEST(sig->size() == 256u);
    BOOST_TEST(cert.VerifySignature("signed bytes", *sig));
    BOOST_TEST(!cert.VerifySignature("signed bytez", *sig));
    std::string flipped = *sig;
    flipped[flipped.size() / 2] ^= 0x01;
    BOOST_TEST(!cert.VerifySignature("signed bytes", flipped));
    BOOST_TEST(!cert.VerifySignature("signed bytes", ""));
    BOOST_TEST(!cert.VerifySignature("signed bytes", std::string(512, '\0')));
    // Another node's key does not verify.
    auto other = TestPki::Get().Identity("hz-2", type).Sign("signed bytes");
    BOOST_TEST(!cert.VerifySignature("signed bytes", *other));
  }
}

BOOST_AUTO_TEST_CASE(RsaUsesPss) {
  // RSASSA-PSS is randomized: two signatures of the same bytes differ.
  const pa::NodeIdentity& id = TestPki::Get().Identity("hz-1", pa::KeyType::kRsa);
  BOOST_TEST(*id.Sign("x") != *id.Sign("x"));
}

BOOST_AUTO_TEST_CASE(ValidityWindowFromTheCertificate) {
  const int64_t nb = (NowUs() / 1'000'000 - 100) * 1'000'000;
  const int64_t na = nb + 3'600'000'000;
  pa::MintOptions o = NodeOptions("hz-5");
  o.not_before_us = nb;
  o.not_after_us = na;
  auto pair = MustMint(pa::MintCertificate(TestPki::Get().ca_pair(), o));
  auto r = Check(pair, nb + 1'000'000);
  BOOST_REQUIRE(r.error == pa::CertificateError::kNone);
  BOOST_TEST(r.certificate->not_before_us() == nb);
  BOOST_TEST(r.certificate->not_after_us() == na);
  BOOST_TEST(r.certificate->ValidAt(nb));
  BOOST_TEST(r.certificate->ValidAt(na));
  BOOST_TEST(!r.certificate->ValidAt(na + 1));
  BOOST_TEST(!r.certificate->ValidAt(nb - 1));
  // Judged at the time given, not the machine's.
  BOOST_TEST((Check(pair, na + 2'000'000).error == pa::CertificateError::kExpired));
  BOOST_TEST((Check(pair, nb - 2'000'000).error == pa::CertificateError::kExpired));
}

BOOST_AUTO_TEST_CASE(ForeignAuthority) {
  auto other_ca = MustMint(pa::MintCertificateAuthority("another-cluster"));
  auto pair = MustMint(pa::MintNodeCertificate(other_ca, "hz-2"));
  auto r = Check(pair);
  BOOST_TEST((r.error == pa::CertificateError::kUnknownAuthority));
  BOOST_TEST(!r.detail.empty());
  // Self-signed with the right subject.
  pa::MintOptions o = NodeOptions("hz-2");
  auto self_signed = MustMint(pa::MintCertificateAuthority("system:node:hz-2", o));
  BOOST_TEST((Check(self_signed).error == pa::CertificateError::kUnknownAuthority));
}

BOOST_AUTO_TEST_CASE(WrongIdentity) {
  const auto& ca = TestPki::Get().ca_pair();
  auto check = [&](pa::MintOptions o) { return Check(MustMint(pa::MintCertificate(ca, o))).error; };
  pa::MintOptions admin;
  admin.common_name = "kubernetes-admin";
  admin.organizations = {"system:masters"};
  BOOST_TEST((check(admin) == pa::CertificateError::kWrongIdentity));
  pa::MintOptions no_group = NodeOptions("hz-2");
  no_group.organizations = {"system:authenticated"};
  BOOST_TEST((check(no_group) == pa::CertificateError::kWrongIdentity));
  pa::MintOptions no_cn = NodeOptions("hz-2");
  no_cn.common_name = "";
  BOOST_TEST((check(no_cn) == pa::CertificateError::kWrongIdentity));
  pa::MintOptions bad_name = NodeOptions("hz-2");
  bad_name.common_name = "system:node:HZ_2";
  BOOST_TEST((check(bad_name) == pa::CertificateError::kWrongIdentity));
  pa::MintOptions empty_name = NodeOptions("hz-2");
  empty_name.common_name = "system:node:";
  BOOST_TEST((check(empty_name) == pa::CertificateError::kWrongIdentity));
  // The kubelet's serving certificate names the node too, but is no client identity.
  pa::MintOptions serving = NodeOptions("hz-2");
  serving.extended_key_usage = "serverAuth";
  BOOST_TEST((check(serving) == pa::CertificateError::kWrongIdentity));
  // Several groups, system:nodes among them; no extendedKeyUsage at all: accepted.
  pa::MintOptions groups = NodeOptions("hz-2");
  groups.organizations = {"system:authenticated", "system:nodes"};
  BOOST_TEST((check(groups) == pa::CertificateError::kNone));
  pa::MintOptions no_eku = NodeOptions("hz-2");
  no_eku.extended_key_usage = "";
  BOOST_TEST((check(no_eku) == pa::CertificateError::kNone));
}

BOOST_AUTO_TEST_CASE(UnsupportedKeys) {
  const auto& ca = TestPki::Get().ca_pair();
  pa::MintOptions p384 = NodeOptions("hz-2");
  p384.ec_curve = "P-384";
  BOOST_TEST((Check(MustMint(pa::MintCertificate(ca, p384))).error ==
              pa::CertificateError::kUnsupportedKey));
  pa::MintOptions rsa1024 = NodeOptions("hz-2");
  rsa1024.key_type = pa::KeyType::kRsa;
  rsa1024.rsa_bits = 1024;
  auto weak = MustMint(pa::MintCertificate(ca, rsa1024));
  BOOST_TEST((Check(weak).error == pa::CertificateError::kUnsupportedKey));
  // The agent refuses to sign with them too.
  BOOST_TEST(pa::NodeIdentity::FromPem(weak.cert_pem, weak.key_pem).status().code() ==
             absl::StatusCode::kInvalidArgument);
}

BOOST_AUTO_TEST_CASE(MalformedDer) {
  const std::string der = DerOf(TestPki::Get().NodePair("hz-2"));
  const auto& ca = *TestPki::Get().ca();
  BOOST_TEST((pa::NodeCertificate::Verify("", ca, NowUs()).error == pa::CertificateError::kMalformed));
  BOOST_TEST((pa::NodeCertificate::Verify("garbage", ca, NowUs()).error ==
              pa::CertificateError::kMalformed));
  BOOST_TEST((pa::NodeCertificate::Verify(der.substr(0, der.size() - 1), ca, NowUs()).error ==
              pa::CertificateError::kMalformed));
  BOOST_TEST((pa::NodeCertificate::Verify(der + "x", ca, NowUs()).error ==
              pa::CertificateError::kMalformed));
  // A flipped byte inside the signed part breaks the CA's signature.
  std::string tampered = der;
  tampered[tampered.size() / 2] ^= 0x01;
  BOOST_TEST((pa::NodeCertificate::Verify(tampered, ca, NowUs()).error !=
              pa::CertificateError::kNone));
}

BOOST_AUTO_TEST_CASE(IntermediateInTheBundle) {
  // A bundle that holds only an intermediate still anchors its leaves.
  pa::MintOptions inter;
  inter.common_name = "kubelet-signer";
  inter.is_ca = true;
  auto intermediate = MustMint(pa::MintCertificate(TestPki::Get().ca_pair(), inter));
  auto leaf = MustMint(pa::MintNodeCertificate(intermediate, "hz-7"));
  auto only_intermediate = pa::CertificateAuthority::FromPem(intermediate.cert_pem);
  BOOST_REQUIRE(only_intermediate.ok());
  auto r = pa::NodeCertificate::Verify(AnyDer(leaf.cert_pem), **only_intermediate, NowUs());
  BOOST_TEST((r.error == pa::CertificateError::kNone), r.detail);
  // The root alone does not (the leaf datagram carries no intermediate).
  BOOST_TEST((Check(leaf).error == pa::CertificateError::kUnknownAuthority));
  // Root + intermediate in one bundle: both work.
  auto both = pa::CertificateAuthority::FromPem(TestPki::Get().ca_pair().cert_pem + intermediate.cert_pem);
  BOOST_REQUIRE(both.ok());
  BOOST_TEST((pa::NodeCertificate::Verify(AnyDer(leaf.cert_pem), **both, NowUs()).error ==
              pa::CertificateError::kNone));
}

BOOST_AUTO_TEST_CASE(IdentityErrors) {
  const auto& hz2 = TestPki::Get().NodePair("hz-2");
  const auto& hz3 = TestPki::Get().NodePair("hz-3");
  // Key of another certificate.
  BOOST_TEST(pa::NodeIdentity::FromPem(hz2.cert_pem, hz3.key_pem).status().code() ==
             absl::StatusCode::kInvalidArgument);
  BOOST_TEST(pa::NodeIdentity::FromPem("", hz2.key_pem).status().code() ==
             absl::StatusCode::kInvalidArgument);
  BOOST_TEST(pa::NodeIdentity::FromPem(hz2.cert_pem, "").status().code() ==
             absl::StatusCode::kInvalidArgument);
  auto admin_options = NodeOptions("x");
  admin_options.common_name = "kubernetes-admin";
  auto admin = MustMint(pa::MintCertificate(TestPki::Get().ca_pair(), admin_options));
  auto refused = pa::NodeIdentity::FromPem(admin.cert_pem, admin.key_pem);
  BOOST_TEST(refused.status().code() == absl::StatusCode::kInvalidArgument);
  BOOST_TEST(std::string(refused.status().message()).find("kubernetes-admin") != std::string::npos);
  // The kubelet's file holds certificate and key together.
  auto both = pa::NodeIdentity::FromPem(hz2.cert_pem + hz2.key_pem, hz2.cert_pem + hz2.key_pem);
  BOOST_REQUIRE(both.ok());
  BOOST_TEST((*both)->node() == "hz-2");
}

BOOST_AUTO_TEST_CASE(Files) {
  const auto& hz2 = TestPki::Get().NodePair("hz-2");
  const std::string path = "/tmp/poolcoord-agent-test-" + std::to_string(::getpid()) + ".pem";
  {
    std::ofstream out(path);
    out << hz2.cert_pem << hz2.key_pem;
  }
  auto id = pa::NodeIdentity::FromFiles(path, path);
  BOOST_REQUIRE_MESSAGE(id.ok(), id.status().ToString());
  BOOST_TEST((*id)->node() == "hz-2");
  auto ca_path = path + ".ca";
  {
    std::ofstream out(ca_path);
    out << TestPki::Get().ca_pair().cert_pem;
  }
  BOOST_TEST(pa::CertificateAuthority::FromFile(ca_path).ok());
  std::remove(path.c_str());
  std::remove(ca_path.c_str());
  BOOST_TEST(pa::NodeIdentity::FromFiles(path, path).status().code() == absl::StatusCode::kNotFound);
  BOOST_TEST(pa::CertificateAuthority::FromFile(ca_path).status().code() ==
             absl::StatusCode::kNotFound);
  BOOST_TEST(pa::CertificateAuthority::FromPem("not pem").status().code() ==
             absl::StatusCode::kInvalidArgument);
}

// A leaf carrying kModelledSignatureOrganization signs by model; only an
// authority made to take modelled signatures accepts them, and then only the
// signer's own over the very data (as a real signature).
BOOST_AUTO_TEST_CASE(ModelledSignaturesOnlyWhereTheAuthorityTakesThem) {
  pa::MintOptions o = NodeOptions("hz-1");
  o.organizations.push_back(pa::kModelledSignatureOrganization);
  const pa::MintedKeyPair pair = MustMint(pa::MintCertificate(TestPki::Get().ca_pair(), o));
  auto id = pa::NodeIdentity::FromPem(pair.cert_pem, pair.key_pem);
  BOOST_REQUIRE(id.ok());
  BOOST_TEST((*id)->modelled());
  auto sig = (*id)->Sign("signed bytes");
  BOOST_REQUIRE(sig.ok());
  BOOST_TEST(sig->size() == 32u);  // a SHA-256, not an ECDSA signature
  BOOST_TEST(*(*id)->Sign("signed bytes") == *sig);  // the model is deterministic

  auto modelling = pa::CertificateAuthority::FromPem(TestPki::Get().ca_pair().cert_pem,
                                                      {.modelled_signatures = true});
  BOOST_REQUIRE(modelling.ok());
  auto taken = (*id)->VerifyAgainst(**modelling, NowUs());
  BOOST_REQUIRE_MESSAGE(taken.error == pa::CertificateError::kNone, taken.detail);
  BOOST_TEST(taken.certificate->modelled());
  BOOST_TEST(taken.certificate->VerifySignature("signed bytes", *sig));
  BOOST_TEST(!taken.certificate->VerifySignature("other bytes", *sig));

  // Another node's model over the same bytes is not this node's signature.
  pa::MintOptions other = NodeOptions("hz-2");
  other.organizations.push_back(pa::kModelledSignatureOrganization);
  const pa::MintedKeyPair other_pair = MustMint(pa::MintCertificate(TestPki::Get().ca_pair(), other));
  auto other_id = pa::NodeIdentity::FromPem(other_pair.cert_pem, other_pair.key_pem);
  BOOST_REQUIRE(other_id.ok());
  BOOST_TEST(!taken.certificate->VerifySignature("signed bytes", *(*other_id)->Sign("signed bytes")));

  // An ordinary authority checks the key's real signature: the model fails.
  auto real = (*id)->VerifyAgainst(*TestPki::Get().ca(), NowUs());
  BOOST_REQUIRE(real.error == pa::CertificateError::kNone);
  BOOST_TEST(!real.certificate->modelled());
  BOOST_TEST(!real.certificate->VerifySignature("signed bytes", *sig));

  // A leaf without the organization signs for real, whatever the authority.
  const pa::NodeIdentity& plain = TestPki::Get().Identity("hz-3", pa::KeyType::kEcdsaP256);
  BOOST_TEST(!plain.modelled());
  auto plain_sig = plain.Sign("signed bytes");
  BOOST_REQUIRE(plain_sig.ok());
  auto plain_cert = plain.VerifyAgainst(**modelling, NowUs());
  BOOST_REQUIRE(plain_cert.error == pa::CertificateError::kNone);
  BOOST_TEST(!plain_cert.certificate->modelled());
  BOOST_TEST(plain_cert.certificate->VerifySignature("signed bytes", *plain_sig));
}
