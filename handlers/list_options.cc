#include "handlers/list_options.h"

#include <charconv>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "handlers/registry/registry.h"
#include "rapidjson/document.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"
#include "store/api_error.h"
#include "store/object_codec.h"

namespace poolcoord::handlers {
namespace {

bool ParseInt(std::string_view text, int64_t* out) {
  if (text.empty()) return false;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

absl::Status InvalidListOptions(std::vector<store::FieldCause> causes) {
  // kube-apiserver reports these against the kind "ListOptions" with group meta.k8s.io.
  store::ApiErrorInfo info;
  info.code = 422;
  info.reason = "Invalid";
  info.kind = "ListOptions";
  info.group = "meta.k8s.io";
  std::string joined;
  for (size_t i = 0; i < causes.size(); ++i) {
    absl::StrAppend(&joined, i ? ", " : "", causes[i].field, ": ", causes[i].message);
  }
  info.message = absl::StrCat("ListOptions.meta.k8s.io \"\" is invalid: ",
                              causes.size() > 1 ? absl::StrCat("[", joined, "]") : joined);
  info.causes = std::move(causes);
  return store::MakeApiError(absl::StatusCode::kInvalidArgument, info);
}

}  // namespace

std::vector<std::string> SupportedFieldSelectors(store::Kind kind) {
  std::vector<std::string> fields = {"metadata.name", "metadata.namespace"};
  for (const registry::SelectableField& f : registry::ForKind(kind).SelectableFields()) {
    fields.emplace_back(f.path);
  }
  return fields;
}

std::optional<std::string> FieldValue(const store::Object& object, std::string_view field) {
  if (field == "metadata.name") return object.metadata.name;
  if (field == "metadata.namespace") return std::string();
  for (const registry::SelectableField& f : registry::ForKind(object.kind).SelectableFields()) {
    if (field == f.path) return f.value(object);
  }
  return std::nullopt;
}

bool MatchesSelectors(const ListOptions& options, const store::Object& object) {
  if (!options.label_selector.Matches(object.metadata.labels)) return false;
  return options.field_selector.Matches(
      [&object](std::string_view field) { return FieldValue(object, field); });
}

absl::StatusOr<ListOptions> ParseListOptions(const Request& request, store::Kind kind) {
  ListOptions out;
  auto labels = LabelSelector::Parse(request.Query("labelSelector"));
  if (!labels.ok()) return labels.status();
  out.label_selector = *std::move(labels);
  auto fields = FieldSelector::Parse(request.Query("fieldSelector"), SupportedFieldSelectors(kind));
  if (!fields.ok()) return fields.status();
  out.field_selector = *std::move(fields);

  out.watch = request.QueryBool("watch");
  out.allow_watch_bookmarks = request.QueryBool("allowWatchBookmarks");
  // A pointer in metav1.ListOptions: set when present, whatever its value.
  if (request.HasQuery("sendInitialEvents")) {
    out.send_initial_events = request.QueryBool("sendInitialEvents");
  }
  if (request.HasQuery("timeoutSeconds") && !request.Query("timeoutSeconds").empty()) {
    int64_t t = 0;
    if (!ParseInt(request.Query("timeoutSeconds"), &t) || t < 0) {
      return store::BadRequestError(absl::StrCat("invalid value for timeoutSeconds: \"",
                                                 std::string(request.Query("timeoutSeconds")), "\""));
    }
    out.timeout_seconds = t;
  }
  if (!request.Query("limit").empty()) {
    if (!ParseInt(request.Query("limit"), &out.limit) || out.limit < 0) {
      return store::BadRequestError(
          absl::StrCat("invalid value for limit: \"", std::string(request.Query("limit")), "\""));
    }
  }
  out.continue_token = std::string(request.Query("continue"));
  std::string_view rv = request.Query("resourceVersion");
  if (!rv.empty()) {
    int64_t v = 0;
    if (!ParseInt(rv, &v) || v < 0) {
      return store::BadRequestError(absl::StrCat("invalid resource version \"", std::string(rv), "\""));
    }
    out.resource_version = v;
  }
  std::string_view match = request.Query("resourceVersionMatch");
  if (match == "Exact") {
    out.resource_version_match = ResourceVersionMatch::kExact;
  } else if (match == "NotOlderThan") {
    out.resource_version_match = ResourceVersionMatch::kNotOlderThan;
  }
  const std::string match_repr = absl::StrCat("\"", std::string(match), "\"");
  std::vector<store::FieldCause> causes;
  if (out.watch) {
    // A watch-list needs no resourceVersion: unset means "the most recent", as
    // for a consistent list (k8s.io/apiserver's cacher reads the current revision).
    if (out.send_initial_events.has_value() &&
        out.resource_version_match != ResourceVersionMatch::kNotOlderThan) {
      causes.push_back(store::FieldForbidden(
          "resourceVersionMatch",
          "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"));
    }
    if (!match.empty()) {
      if (!out.send_initial_events.has_value()) {
        causes.push_back(store::FieldForbidden(
            "resourceVersionMatch",
            "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"));
      }
      if (out.resource_version_match != ResourceVersionMatch::kNotOlderThan) {
        causes.push_back(store::FieldNotSupported("resourceVersionMatch", match_repr,
                                                  "supported values: \"NotOlderThan\""));
      }
      if (!out.continue_token.empty()) {
        causes.push_back(store::FieldForbidden(
            "resourceVersionMatch", "resourceVersionMatch is forbidden when continue is provided"));
      }
    }
  } else {
    if (!match.empty()) {
      if (!out.resource_version.has_value()) {
        causes.push_back(store::FieldForbidden(
            "resourceVersionMatch", "resourceVersionMatch is forbidden unless resourceVersion is provided"));
      }
      if (!out.continue_token.empty()) {
        causes.push_back(store::FieldForbidden(
            "resourceVersionMatch", "resourceVersionMatch is forbidden when continue is provided"));
      }
      if (out.resource_version_match == ResourceVersionMatch::kUnset) {
        causes.push_back(store::FieldNotSupported(
            "resourceVersionMatch", match_repr,
            "supported values: \"Exact\", \"NotOlderThan\", \"\""));
      }
      if (out.resource_version_match == ResourceVersionMatch::kExact && out.resource_version == 0) {
        causes.push_back(store::FieldForbidden(
            "resourceVersionMatch",
            "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\""));
      }
    }
    if (out.send_initial_events.has_value()) {
      causes.push_back(store::FieldForbidden("sendInitialEvents",
                                             "sendInitialEvents is forbidden for list"));
    }
  }
  if (!causes.empty()) return InvalidListOptions(std::move(causes));
  return out;
}

std::string EncodeContinueToken(int64_t revision, const std::string& start_name) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  w.StartObject();
  w.Key("v");
  w.String("poolcoord/v1");
  w.Key("rv");
  w.Int64(revision);
  w.Key("start");
  w.String(start_name.c_str(), start_name.size());
  w.EndObject();
  return absl::WebSafeBase64Escape(std::string(buf.GetString(), buf.GetSize()));
}

absl::Status DecodeContinueToken(const std::string& token, int64_t* revision,
                                 std::string* start_name) {
  std::string raw;
  auto bad = [] {
    return store::BadRequestError(
        "continue key is not valid: the continue parameter must be the value the server "
        "returned in metadata.continue");
  };
  if (!absl::WebSafeBase64Unescape(token, &raw) && !absl::Base64Unescape(token, &raw)) return bad();
  if (!store::CheckJsonNesting(raw, 4).ok()) return bad();
  rapidjson::Document d;
  d.Parse(raw.c_str(), raw.size());
  if (d.HasParseError() || !d.IsObject()) return bad();
  auto v = d.FindMember("v");
  auto rv = d.FindMember("rv");
  auto start = d.FindMember("start");
  if (v == d.MemberEnd() || !v->value.IsString() || std::string_view(v->value.GetString()) != "poolcoord/v1" ||
      rv == d.MemberEnd() || !rv->value.IsInt64() || start == d.MemberEnd() ||
      !start->value.IsString()) {
    return bad();
  }
  *revision = rv->value.GetInt64();
  start_name->assign(start->value.GetString(), start->value.GetStringLength());
  return absl::OkStatus();
}

}  // namespace poolcoord::handlers
