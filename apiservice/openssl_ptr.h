// Owning pointers to the OpenSSL objects the server's certificate code holds
// (pki.cc, dynamic_certificates.cc, tls_server.cc), and the text of OpenSSL's
// first queued error for messages. Header-only; the pointers are as thread-safe
// as the objects they own, OpenSslError reads and clears this thread's queue.
#pragma once

#include <memory>
#include <string>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/x509.h>

namespace poolcoord::apiservice {

struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
using X509Ptr = std::unique_ptr<X509, X509Free>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;
using BioPtr = std::unique_ptr<BIO, BioFree>;

// The first queued OpenSSL error ("error:0480006C:PEM routines::no start line"),
// or "unknown error" when none is queued; clears the queue.
inline std::string OpenSslError() {
  unsigned long code = ERR_get_error();
  char buf[256] = "unknown error";
  if (code != 0) ERR_error_string_n(code, buf, sizeof(buf));
  ERR_clear_error();
  return buf;
}

}  // namespace poolcoord::apiservice
