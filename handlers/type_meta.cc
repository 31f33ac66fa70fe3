#include "handlers/type_meta.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "base/quote.h"
#include "base/string_view.h"
#include "store/api_error.h"

namespace poolcoord::handlers {
namespace {

// summarizeData(body, 30) of k8s.io/apiserver's handlers.
std::string Summary(std::string_view body) {
  constexpr size_t kMax = 30;
  if (body.empty()) return "<empty>";
  std::string_view head = body.substr(0, kMax);
  std::string out = body.front() == '{' ? std::string(head) : absl::BytesToHexString(base::Av(head));
  if (body.size() > kMax) out += " ...";
  return out;
}

std::string Unrecognized(store::Kind kind, std::string_view why, std::string_view body) {
  // Messages carry request bytes: invalid UTF-8 becomes U+FFFD, as Go's JSON
  // encoder writes a Status message.
  return base::ToValidUtf8(absl::StrCat("the object provided is unrecognized (must be of type ",
                                        store::InfoFor(kind).kind_name, "): ", base::Av(why), " (",
                                        Summary(body), ")"));
}

const char* GoJsonKind(const rapidjson::Value& v) {
  if (v.IsString()) return "string";
  if (v.IsNumber()) return "number";
  if (v.IsBool()) return "bool";
  if (v.IsArray()) return "array";
  if (v.IsObject()) return "object";
  return "null";
}

}  // namespace

absl::StatusOr<BodyTypeMeta> CheckBodyTypeMeta(const rapidjson::Value& doc, std::string_view body,
                                               store::Kind kind) {
  constexpr char kParseError[] = "couldn't get version/kind; json parse error: json: cannot unmarshal ";
  BodyTypeMeta out;
  if (!doc.IsObject() && !doc.IsNull()) {
    return store::BadRequestError(Unrecognized(
        kind,
        absl::StrCat(kParseError, GoJsonKind(doc),
                     " into Go value of type struct { APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; "
                     "Kind string \"json:\\\"kind,omitempty\\\"\" }"),
        body));
  }
  if (doc.IsObject()) {
    for (const auto& m : doc.GetObject()) {
      std::string_view key(m.name.GetString(), m.name.GetStringLength());
      if (key != "apiVersion" && key != "kind") continue;
      if (m.value.IsNull()) continue;
      if (!m.value.IsString()) {
        return store::BadRequestError(Unrecognized(
            kind,
            absl::StrCat(kParseError, GoJsonKind(m.value), " into Go struct field .", base::Av(key),
                         " of type string"),
            body));
      }
      (key == "kind" ? out.kind : out.api_version).assign(m.value.GetString(), m.value.GetStringLength());
    }
  }
  if (out.kind.empty()) {
    return store::BadRequestError(
        Unrecognized(kind, absl::StrCat("Object 'Kind' is missing in '", base::Av(body), "'"), body));
  }
  if (out.api_version != store::kGroupVersion) {
    return store::BadRequestError(absl::StrCat("the API version in the data (", out.api_version,
                                               ") does not match the expected API version (",
                                               store::kGroupVersion, ")"));
  }
  return out;
}

absl::Status EmptyBodyError(std::string_view body, store::Kind kind) {
  return store::BadRequestError(Unrecognized(
      kind, "couldn't get version/kind; json parse error: unexpected end of JSON input", body));
}

std::string CannotBeHandledAs(const BodyTypeMeta& type_meta, store::Kind kind) {
  const size_t slash = type_meta.api_version.find('/');
  const std::string_view version = slash == std::string::npos
                                       ? std::string_view(type_meta.api_version)
                                       : std::string_view(type_meta.api_version).substr(slash + 1);
  const char* ours = store::InfoFor(kind).kind_name;
  return absl::StrCat(type_meta.kind, " in version \"", base::Av(version), "\" cannot be handled as a ",
                      ours, ": ");
}

}  // namespace poolcoord::handlers
