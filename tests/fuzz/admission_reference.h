// The AdmissionReview decoder as it was before the single-pass reader (a full
// rapidjson DOM of the body, as handlers/admission_handler.cc had it), kept as
// the fuzz target's oracle: for every input, the new decoder must give the same
// status, headers and body byte for byte. Test code only.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "election/admission_rules.h"
#include "handlers/admission_handler.h"
#include "handlers/status_mapping.h"
#include "rapidjson/document.h"
#include "rapidjson/error/en.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"
#include "store/api_error.h"
#include "base/microtime.h"
#include "store/object_codec.h"

namespace poolcoord::handlers::reference {

namespace {

using rapidjson::Value;

constexpr char kV1[] = "admission.k8s.io/v1";
constexpr char kV1beta1[] = "admission.k8s.io/v1beta1";
constexpr char kLeaseGroup[] = "coordination.k8s.io";

const Value* Member(const Value& obj, const char* name) {
  if (!obj.IsObject()) return nullptr;
  auto it = obj.FindMember(name);
  if (it == obj.MemberEnd()) return nullptr;
  return &it->value;
}

absl::string_view StringView(const Value& v) { return {v.GetString(), v.GetStringLength()}; }

// The string at obj[name]; "" when absent, null or not a string.
absl::string_view StringOr(const Value* obj, const char* name) {
  if (obj == nullptr) return {};
  const Value* v = Member(*obj, name);
  return v && v->IsString() ? StringView(*v) : absl::string_view();
}

// A decoding problem inside a review that has a uid: answered as a review.
struct DecodeError {
  std::string message;
};

std::optional<DecodeError> DecodeLease(const Value* v, const char* where,
                                       election::AdmissionLease& out) {
  if (v == nullptr || v->IsNull()) return std::nullopt;
  if (!v->IsObject()) return DecodeError{absl::StrCat(where, " is not an object")};
  out.present = true;
  if (const Value* md = Member(*v, "metadata"); md && md->IsObject()) {
    if (const Value* ann = Member(*md, "annotations"); ann && ann->IsObject()) {
      if (const Value* val = Member(*ann, election::kDelegateAnnotation)) {
        if (!val->IsString()) {
          return DecodeError{absl::StrCat(where, ".metadata.annotations[",
                                          election::kDelegateAnnotation, "] is not a string")};
        }
        out.delegate_annotation.emplace(StringView(*val));
      }
    }
  }
  if (const Value* spec = Member(*v, "spec"); spec && spec->IsObject()) {
    if (const Value* holder = Member(*spec, "holderIdentity"); holder && !holder->IsNull()) {
      if (!holder->IsString()) {
        return DecodeError{absl::StrCat(where, ".spec.holderIdentity is not a string")};
      }
      out.holder_identity.emplace(StringView(*holder));
    }
    if (const Value* rt = Member(*spec, "renewTime"); rt && !rt->IsNull()) {
      if (rt->IsString()) {
        auto us = base::ParseMicroTime(std::string_view(rt->GetString(), rt->GetStringLength()));
        if (us.ok()) {
          out.renew_time_us = *us;
        } else {
          out.renew_time_invalid = true;
        }
      } else {
        out.renew_time_invalid = true;
      }
    }
  }
  return std::nullopt;
}

template <typename Writer>
void WriteString(Writer& w, absl::string_view s) {
  w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
}

Response ReviewResponse(absl::string_view api_version, absl::string_view uid, bool allowed,
                        int code, absl::string_view reason, absl::string_view message,
                        const std::vector<std::string>& warnings) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  w.StartObject();
  w.Key("apiVersion");
  WriteString(w, api_version);
  w.Key("kind");
  w.String("AdmissionReview");
  w.Key("response");
  w.StartObject();
  w.Key("uid");
  WriteString(w, uid);
  w.Key("allowed");
  w.Bool(allowed);
  if (!allowed) {
    w.Key("status");
    w.StartObject();
    w.Key("metadata");
    w.StartObject();
    w.EndObject();
    w.Key("status");
    w.String("Failure");
    w.Key("message");
    WriteString(w, message);
    w.Key("reason");
    WriteString(w, reason);
    w.Key("code");
    w.Int(code);
    w.EndObject();
  }
  if (!warnings.empty()) {
    w.Key("warnings");
    w.StartArray();
    for (const auto& warning : warnings) WriteString(w, warning);
    w.EndArray();
  }
  w.EndObject();
  w.EndObject();
  Response resp;
  resp.status = 200;
  resp.SetHeader("Content-Type", "application/json");
  resp.body = std::string(buf.GetString(), buf.GetSize());
  return resp;
}

Response Allowed(absl::string_view api_version, absl::string_view uid,
                 const std::vector<std::string>& warnings = {}) {
  return ReviewResponse(api_version, uid, true, 200, "", "", warnings);
}

Response Denied(absl::string_view api_version, absl::string_view uid, absl::string_view message) {
  return ReviewResponse(api_version, uid, false, 403, "Forbidden", message, {});
}

Response BadReview(absl::string_view api_version, absl::string_view uid, absl::string_view message) {
  return ReviewResponse(api_version, uid, false, 400, "BadRequest",
                        absl::StrCat("malformed AdmissionReview: ", message), {});
}

// Group of an apiVersion "group/version" ("" for the core group "v1").
absl::string_view GroupOf(absl::string_view api_version) {
  auto slash = api_version.find('/');
  return slash == absl::string_view::npos ? absl::string_view() : api_version.substr(0, slash);
}

}  // namespace

inline Response ServeAdmissionReview(const Request& req, const AdmissionOptions& opts) {
  if (req.method != "POST") {
    return ErrorResponse(store::MethodNotAllowedError(absl::StrCat(
        req.method, " is not supported on ", kAdmissionPath, ": send an AdmissionReview with POST")));
  }
  if (req.body.size() > kMaxAdmissionReviewBytes) {
    return ErrorResponse(store::RequestEntityTooLargeError(absl::StrCat(
        "AdmissionReview of ", req.body.size(), " bytes exceeds the limit of ",
        kMaxAdmissionReviewBytes, " bytes")));
  }
  if (absl::Status nesting = store::CheckJsonNesting(req.body); !nesting.ok()) {
    return ErrorResponse(nesting);
  }
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseDefaultFlags>(req.body.data(), req.body.size());
  if (doc.HasParseError()) {
    return ErrorResponse(store::BadRequestError(absl::StrCat(
        "malformed AdmissionReview: ", rapidjson::GetParseError_En(doc.GetParseError()),
        " at offset ", doc.GetErrorOffset())));
  }
  if (!doc.IsObject()) {
    return ErrorResponse(store::BadRequestError("malformed AdmissionReview: not a JSON object"));
  }
  const absl::string_view api_version = StringOr(&doc, "apiVersion");
  if (api_version != kV1 && api_version != kV1beta1) {
    return ErrorResponse(store::BadRequestError(absl::StrCat(
        "unsupported AdmissionReview apiVersion \"", api_version, "\"; send ", kV1, " or ",
        kV1beta1)));
  }
  if (StringOr(&doc, "kind") != "AdmissionReview") {
    return ErrorResponse(store::BadRequestError(absl::StrCat(
        "malformed AdmissionReview: kind must be AdmissionReview, got \"", StringOr(&doc, "kind"),
        "\"")));
  }
  const Value* request = Member(doc, "request");
  if (request == nullptr || !request->IsObject()) {
    return ErrorResponse(
        store::BadRequestError("malformed AdmissionReview: request is missing or not an object"));
  }
  const absl::string_view uid = StringOr(request, "uid");
  if (uid.empty()) {
    return ErrorResponse(
        store::BadRequestError("malformed AdmissionReview: request.uid is missing or empty"));
  }

  // From here on every answer is a review echoing uid.
  const Value* object = Member(*request, "object");
  const Value* object_md = object ? Member(*object, "metadata") : nullptr;
  absl::string_view group, kind;
  if (const Value* k = Member(*request, "kind"); k && k->IsObject()) {
    group = StringOr(k, "group");
    kind = StringOr(k, "kind");
  } else {
    group = GroupOf(StringOr(object, "apiVersion"));
    kind = StringOr(object, "kind");
  }
  absl::string_view ns = StringOr(request, "namespace");
  if (ns.empty()) ns = StringOr(object_md, "namespace");
  if (group != kLeaseGroup || kind != "Lease") {
    return Allowed(api_version, uid,
                   {absl::StrCat("poolcoord checked nothing: ", group.empty() ? "core" : group,
                                 "/", kind, " is not a ", kLeaseGroup, " Lease")});
  }
  if (ns != election::kNodeLeaseNamespace) {
    return Allowed(api_version, uid,
                   {absl::StrCat("poolcoord checked nothing: Lease in namespace \"", ns,
                                 "\" is not in ", election::kNodeLeaseNamespace)});
  }
  const absl::string_view operation = StringOr(request, "operation");
  if (operation != "CREATE" && operation != "UPDATE") {
    return Allowed(api_version, uid,
                   {absl::StrCat("poolcoord checked nothing: operation \"", operation,
                                 "\" is neither CREATE nor UPDATE")});
  }

  election::AdmissionAttributes attrs;
  if (auto err = DecodeLease(Member(*request, "object"), "request.object", attrs.object)) {
    return BadReview(api_version, uid, err->message);
  }
  if (auto err = DecodeLease(Member(*request, "oldObject"), "request.oldObject",
                             attrs.old_object)) {
    return BadReview(api_version, uid, err->message);
  }
  attrs.operation = std::string(operation);
  attrs.namespace_name = std::string(ns);
  attrs.name = std::string(StringOr(object_md, "name"));
  if (attrs.name.empty()) attrs.name = std::string(StringOr(request, "name"));
  if (const Value* user = Member(*request, "userInfo"); user && user->IsObject()) {
    attrs.user.username = std::string(StringOr(user, "username"));
    attrs.user.uid = std::string(StringOr(user, "uid"));
    if (const Value* groups = Member(*user, "groups"); groups && groups->IsArray()) {
      for (const Value& g : groups->GetArray()) {
        if (g.IsString()) attrs.user.groups.emplace_back(StringView(g));
      }
    }
  }

  if (opts.rules == nullptr || opts.store == nullptr) {
    // Only a wiring mistake gets here; failing closed on annotated writes alone
    // keeps every plain heartbeat flowing.
    if (!attrs.object.delegate_annotation) return Allowed(api_version, uid);
    return Denied(api_version, uid, "poolcoord's lease rules are not configured; retry later");
  }
  election::AdmissionDecision decision =
      election::DecideDelegatedHeartbeat(attrs, *opts.rules, opts.store);
  if (!decision.allowed) return Denied(api_version, uid, decision.message);
  return Allowed(api_version, uid, decision.warnings);
}

}  // namespace poolcoord::handlers::reference
