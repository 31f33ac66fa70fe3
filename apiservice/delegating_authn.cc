#include "apiservice/delegating_authn.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "rapidjson/document.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"

namespace poolcoord::apiservice {
namespace {

std::vector<std::string> StringArray(const rapidjson::Value& v) {
  std::vector<std::string> out;
  if (!v.IsArray()) return out;
  for (const auto& s : v.GetArray()) {
    if (s.IsString()) out.emplace_back(s.GetString(), s.GetStringLength());
  }
  return out;
}

std::string StringMember(const rapidjson::Value& object, const char* key) {
  auto it = object.FindMember(key);
  if (it == object.MemberEnd() || !it->value.IsString()) return "";
  return std::string(it->value.GetString(), it->value.GetStringLength());
}

}  // namespace

ReviewPoster KubeClientPoster(store::KubeClient* client) {
  return [client](std::string_view path, std::string_view body) {
    return client->Post(path, body);
  };
}

WebhookTokenReviewer::WebhookTokenReviewer(ReviewPoster post, WebhookTokenReviewerOptions options)
    : post_(std::move(post)),
      options_(options),
      cache_(options.clock, options.max_cache_entries) {
  hmac_key_.resize(32);
  if (RAND_bytes(reinterpret_cast<unsigned char*>(hmac_key_.data()),
                 static_cast<int>(hmac_key_.size())) != 1) {
    // Without randomness the key is still private to the process.
    hmac_key_ = absl::StrCat(reinterpret_cast<uintptr_t>(this), "-poolcoord-token-cache");
  }
}

std::string WebhookTokenReviewer::CacheKey(const std::string& token) const {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  HMAC(EVP_sha256(), hmac_key_.data(), static_cast<int>(hmac_key_.size()),
       reinterpret_cast<const unsigned char*>(token.data()), token.size(), digest, &length);
  return std::string(reinterpret_cast<char*>(digest), length);
}

std::string WebhookTokenReviewer::RequestBody(const std::string& token) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
  w.StartObject();
  w.Key("apiVersion");
  w.String("authentication.k8s.io/v1");
  w.Key("kind");
  w.String("TokenReview");
  w.Key("spec");
  w.StartObject();
  w.Key("token");
  w.String(token.data(), static_cast<rapidjson::SizeType>(token.size()));
  w.EndObject();
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}

absl::StatusOr<TokenReviewResult> WebhookTokenReviewer::ParseResponse(std::string_view body) {
  rapidjson::Document d;
  d.Parse(body.data(), body.size());
  if (d.HasParseError() || !d.IsObject()) {
    return absl::InvalidArgumentError("TokenReview answer is not a JSON object");
  }
  TokenReviewResult result;
  auto status = d.FindMember("status");
  if (status == d.MemberEnd() || !status->value.IsObject()) return result;
  const rapidjson::Value& s = status->value;
  if (auto a = s.FindMember("authenticated"); a != s.MemberEnd() && a->value.IsBool()) {
    result.authenticated = a->value.GetBool();
  }
  result.error = StringMember(s, "error");
  if (auto u = s.FindMember("user"); u != s.MemberEnd() && u->value.IsObject()) {
    const rapidjson::Value& user = u->value;
    result.user.username = StringMember(user, "username");
    result.user.uid = StringMember(user, "uid");
    if (auto g = user.FindMember("groups"); g != user.MemberEnd()) {
      result.user.groups = StringArray(g->value);
    }
    if (auto e = user.FindMember("extra"); e != user.MemberEnd() && e->value.IsObject()) {
      for (const auto& m : e->value.GetObject()) {
        result.user.extra[std::string(m.name.GetString(), m.name.GetStringLength())] =
            StringArray(m.value);
      }
    }
  }
  return result;
}

absl::StatusOr<TokenReviewResult> WebhookTokenReviewer::Review(const std::string& token) {
  const std::string key = CacheKey(token);
  if (std::optional<TokenReviewResult> cached = cache_.Get(key)) return *cached;
  absl::StatusOr<store::KubeResponse> r = post_(kTokenReviewPath, RequestBody(token));
  if (!r.ok()) {
    return absl::Status(r.status().code(),
                        absl::StrCat("TokenReview: ", r.status().message()));
  }
  if (r->status < 200 || r->status > 299) {
    absl::Status st = store::StatusFromKubeResponse(*r);
    return absl::Status(st.code(), absl::StrCat("TokenReview: HTTP ", r->status, ": ",
                                                st.message()));
  }
  absl::StatusOr<TokenReviewResult> result = ParseResponse(r->body);
  if (!result.ok()) return result.status();
  // An authenticated answer that names nobody cannot become a user.
  if (result->authenticated && result->user.username.empty()) {
    return absl::InternalError("TokenReview: authenticated without a username");
  }
  if (result->error.empty()) cache_.Put(key, *result, options_.cache_ttl);
  return result;
}

}  // namespace poolcoord::apiservice
