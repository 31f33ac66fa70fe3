#include "apiservice/delegating_authz.h"

#include "absl/strings/str_cat.h"
#include "rapidjson/document.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"

namespace poolcoord::apiservice {
namespace {

using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer>;

void Str(JsonWriter& w, const std::string& s) {
  w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
}

// omitempty: a field is written only when non-empty.
void Field(JsonWriter& w, const char* key, const std::string& value) {
  if (value.empty()) return;
  w.Key(key);
  Str(w, value);
}

}  // namespace

std::string SubjectAccessReviewSpec(const base::UserInfo& user, const RequestInfo& info) {
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  if (info.is_resource_request) {
    w.Key("resourceAttributes");
    w.StartObject();
    Field(w, "namespace", info.namespace_);
    Field(w, "verb", info.verb);
    Field(w, "group", info.api_group);
    Field(w, "version", info.api_version);
    Field(w, "resource", info.resource);
    Field(w, "subresource", info.subresource);
    Field(w, "name", info.name);
    w.EndObject();
  } else {
    w.Key("nonResourceAttributes");
    w.StartObject();
    Field(w, "path", info.path);
    Field(w, "verb", info.verb);
    w.EndObject();
  }
  Field(w, "user", user.username);
  if (!user.groups.empty()) {
    w.Key("groups");
    w.StartArray();
    for (const std::string& g : user.groups) Str(w, g);
    w.EndArray();
  }
  if (!user.extra.empty()) {
    w.Key("extra");
    w.StartObject();
    for (const auto& [key, values] : user.extra) {  // std::map: sorted, as Go marshals maps
      Str(w, key);
      w.StartArray();
      for (const std::string& v : values) Str(w, v);
      w.EndArray();
    }
    w.EndObject();
  }
  Field(w, "uid", user.uid);
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}

std::string WebhookAccessReviewer::RequestBody(const std::string& spec_json) {
  return absl::StrCat(
      R"({"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":)",
      spec_json, "}");
}

absl::StatusOr<AccessReviewResult> WebhookAccessReviewer::ParseResponse(std::string_view body) {
  rapidjson::Document d;
  d.Parse(body.data(), body.size());
  if (d.HasParseError() || !d.IsObject()) {
    return absl::InvalidArgumentError("SubjectAccessReview answer is not a JSON object");
  }
  AccessReviewResult result;
  auto status = d.FindMember("status");
  if (status == d.MemberEnd() || !status->value.IsObject()) return result;
  const rapidjson::Value& s = status->value;
  if (auto a = s.FindMember("allowed"); a != s.MemberEnd() && a->value.IsBool()) {
    result.allowed = a->value.GetBool();
  }
  if (auto a = s.FindMember("denied"); a != s.MemberEnd() && a->value.IsBool()) {
    result.denied = a->value.GetBool();
  }
  if (auto a = s.FindMember("reason"); a != s.MemberEnd() && a->value.IsString()) {
    result.reason.assign(a->value.GetString(), a->value.GetStringLength());
  }
  if (result.allowed && result.denied) {
    return absl::InternalError(
        "webhook subject access review returned both allow and deny response");
  }
  return result;
}

WebhookAccessReviewer::WebhookAccessReviewer(ReviewPoster post,
                                             WebhookAccessReviewerOptions options)
    : post_(std::move(post)), options_(options), cache_(options.clock, options.max_cache_entries) {}

absl::StatusOr<AccessReviewResult> WebhookAccessReviewer::Review(const base::UserInfo& user,
                                                                 const RequestInfo& info) {
  const std::string spec = SubjectAccessReviewSpec(user, info);
  if (std::optional<AccessReviewResult> cached = cache_.Get(spec)) return *cached;
  absl::StatusOr<store::KubeResponse> r = post_(kSubjectAccessReviewPath, RequestBody(spec));
  if (!r.ok()) {
    return absl::Status(r.status().code(),
                        absl::StrCat("SubjectAccessReview: ", r.status().message()));
  }
  if (r->status < 200 || r->status > 299) {
    absl::Status st = store::StatusFromKubeResponse(*r);
    return absl::Status(st.code(), absl::StrCat("SubjectAccessReview: HTTP ", r->status, ": ",
                                                st.message()));
  }
  absl::StatusOr<AccessReviewResult> result = ParseResponse(r->body);
  if (!result.ok()) return result.status();
  cache_.Put(spec, *result, result->allowed ? options_.allow_cache_ttl : options_.deny_cache_ttl);
  return result;
}

}  // namespace poolcoord::apiservice
