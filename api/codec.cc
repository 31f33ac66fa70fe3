#include "api/codec.h"

#include <cmath>
#include <limits>
#include <optional>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/json_write.h"
#include "base/microtime.h"
#include "base/quote.h"
#include "base/string_view.h"

namespace poolcoord::api {
namespace {

using base::JsonField;
using base::JsonString;
using rapidjson::Value;

std::string_view Key(const Value& name) {
  return std::string_view(name.GetString(), name.GetStringLength());
}

const char* SchemaKind(const Value& v) { return JsonKindName(v, JsonKindNames::kSchema); }

// A schema type error, worded as kube-apiserver words it for a custom resource:
// `spec.x: Invalid value: "string": spec.x in body must be of type integer:
// "string"` (FieldValueTypeInvalid).
FieldCause SchemaTypeError(std::string_view path, std::string_view want, std::string_view got) {
  const std::string quoted = base::GoQuote(got);
  return FieldTypeInvalid(path, quoted,
                          absl::StrCat(base::Av(path), " in body must be of type ", base::Av(want),
                                       ": ", quoted));
}

// Reads values as a CustomResourceDefinition's schema types them, recording
// what it refuses in `findings` (the header's rules).
class SchemaReader {
 public:
  explicit SchemaReader(DecodeFindings* findings) : f_(*findings) {}

  void Unknown(std::string_view prefix, std::string_view key) {
    if (f_.unknown != nullptr) f_.unknown->push_back(absl::StrCat(base::Av(prefix), ".", base::Av(key)));
  }
  void Cause(FieldCause cause) { f_.causes.push_back(std::move(cause)); }

  // True when `v` is an object; null is absent, any other type a cause at `path`.
  bool ObjectAt(const Value& v, std::string_view path) {
    if (v.IsObject()) return true;
    if (!v.IsNull()) Cause(SchemaTypeError(path, "object", SchemaKind(v)));
    return false;
  }

  void String(const Value& v, std::string_view path, std::string* out) {
    if (v.IsString()) {
      out->assign(v.GetString(), v.GetStringLength());
    } else if (!v.IsNull()) {
      Cause(SchemaTypeError(path, "string", SchemaKind(v)));
    }
  }

  void OptString(const Value& v, std::string_view path, std::optional<std::string>* out) {
    if (v.IsNull()) {
      out->reset();
    } else if (v.IsString()) {
      out->emplace(v.GetString(), v.GetStringLength());
    } else {
      Cause(SchemaTypeError(path, "string", SchemaKind(v)));
    }
  }

  void Bool(const Value& v, std::string_view path, bool* out) {
    if (v.IsNull()) {
      *out = false;
    } else if (v.IsBool()) {
      *out = v.GetBool();
    } else {
      Cause(SchemaTypeError(path, "boolean", SchemaKind(v)));
    }
  }

  // An integer, also as a number with no fraction within +-2^53 ("3.0", "1e2"),
  // as go-openapi's validator takes it for type integer. Past the C++ type's
  // range (int32 for format int32) a cause: a CustomResourceDefinition would
  // store it, a typed field cannot hold it.
  template <typename Int>
  void Integer(const Value& v, std::string_view path, std::optional<Int>* out) {
    if (v.IsNull()) {
      out->reset();
      return;
    }
    int64_t n = 0;
    if (v.IsInt64()) {
      n = v.GetInt64();
    } else if (v.IsDouble() && std::abs(v.GetDouble()) <= 9007199254740992.0 &&
               v.GetDouble() == static_cast<double>(static_cast<int64_t>(v.GetDouble()))) {
      n = static_cast<int64_t>(v.GetDouble());
    } else {
      Cause(SchemaTypeError(path, "integer", SchemaKind(v)));
      return;
    }
    if (n < std::numeric_limits<Int>::min() || n > std::numeric_limits<Int>::max()) {
      Cause(FieldInvalid(path, std::to_string(n),
                         sizeof(Int) == 4 ? "must be a 32-bit integer (format int32)"
                                          : "must be a 64-bit integer (format int64)"));
      return;
    }
    *out = static_cast<Int>(n);
  }

  // A MicroTime (schema: string, format date-time). What is no date-time at all
  // is worded as the schema's format check words it; an RFC 3339 time without
  // exactly 6 fractional digits, which a CustomResourceDefinition would store,
  // is refused with the reason (base/microtime.h: Go clients could not read it back).
  void MicroTime(const Value& v, std::string_view path, std::optional<int64_t>* out) {
    if (v.IsNull()) {
      out->reset();
      return;
    }
    if (!v.IsString()) {
      // go-openapi names the Go type it decoded when a value of another type
      // meets a format: "int64", "float64", "" (bool, object). An array passes
      // there (and is stored); we cannot hold one, so it is a type error.
      if (v.IsArray()) {
        Cause(SchemaTypeError(path, "string", "array"));
      } else {
        Cause(SchemaTypeError(path, "date-time", v.IsInt64() ? "int64" : v.IsNumber() ? "float64" : ""));
      }
      return;
    }
    std::string_view text(v.GetString(), v.GetStringLength());
    auto parsed = base::ParseMicroTime(text);
    if (parsed.ok()) {
      *out = *parsed;
    } else if (base::ParseTime(text).ok()) {
      Cause(FieldInvalid(path, base::GoQuote(text),
                         "must be a MicroTime: RFC 3339 with exactly 6 fractional digits, e.g. "
                         "\"2024-01-01T00:00:00.000000Z\""));
    } else {
      Cause(SchemaTypeError(path, "date-time", text));
    }
  }

 private:
  DecodeFindings& f_;
};

// spec.proof: {heartbeat, certificate}, both strings; their content (base64,
// PEM, the heartbeat itself) is the lease rules' to judge (422/403 there).
void DecodeProof(SchemaReader& r, const Value& v, DelegationFields* d) {
  if (v.IsNull()) {
    d->proof.reset();
    return;
  }
  if (!r.ObjectAt(v, "spec.proof")) return;
  DelegationProof proof;
  for (const auto& m : v.GetObject()) {
    std::string_view key = Key(m.name);
    if (key == "heartbeat") {
      r.String(m.value, "spec.proof.heartbeat", &proof.heartbeat);
    } else if (key == "certificate") {
      r.String(m.value, "spec.proof.certificate", &proof.certificate);
    } else {
      r.Unknown("spec.proof", key);
    }
  }
  d->proof = std::move(proof);
}

void DecodeAcceptedProof(SchemaReader& r, const Value& v, DelegationFields* d) {
  if (v.IsNull()) {
    d->accepted_proof.reset();
    return;
  }
  if (!r.ObjectAt(v, "status.proof")) return;
  AcceptedProof proof;
  for (const auto& m : v.GetObject()) {
    std::string_view key = Key(m.name);
    if (key == "bootID") {
      r.String(m.value, "status.proof.bootID", &proof.boot_id);
    } else if (key == "sequence") {
      std::optional<int64_t> n;
      r.Integer(m.value, "status.proof.sequence", &n);
      proof.sequence = n.value_or(0);
    } else if (key == "challenge") {
      r.String(m.value, "status.proof.challenge", &proof.challenge);
    } else {
      r.Unknown("status.proof", key);
    }
  }
  d->accepted_proof = std::move(proof);
}

void DecodeChallenges(SchemaReader& r, const Value& v, DelegationFields* d) {
  std::vector<DelegationChallenge> challenges;
  if (!v.IsNull()) {
    if (!v.IsArray()) {
      r.Cause(SchemaTypeError("status.challenges", "array", SchemaKind(v)));
      return;
    }
    for (rapidjson::SizeType i = 0; i < v.Size(); ++i) {
      const Value& e = v[i];
      const std::string at = absl::StrCat("status.challenges[", i, "]");
      if (!r.ObjectAt(e, at)) continue;
      DelegationChallenge c;
      for (const auto& m : e.GetObject()) {
        std::string_view key = Key(m.name);
        if (key == "value") {
          r.String(m.value, at + ".value", &c.value);
        } else if (key == "issueTime") {
          std::optional<int64_t> t;
          r.MicroTime(m.value, at + ".issueTime", &t);
          c.issue_time_us = t.value_or(0);
        } else {
          r.Unknown("status.challenges", key);
        }
      }
      challenges.push_back(std::move(c));
    }
  }
  d->challenges = std::move(challenges);
}

void DecodeLeaderTerm(SchemaReader& r, const Value& v, LeaseStatus* status) {
  if (v.IsNull()) {
    status->leader_term.reset();
    return;
  }
  if (!r.ObjectAt(v, "status.leaderTerm")) return;
  LeaderTerm term;
  for (const auto& m : v.GetObject()) {
    std::string_view key = Key(m.name);
    if (key == "poolLeaseUID") {
      r.String(m.value, "status.leaderTerm.poolLeaseUID", &term.pool_lease_uid);
    } else if (key == "leaseTransitions") {
      std::optional<int32_t> t;
      r.Integer(m.value, "status.leaderTerm.leaseTransitions", &t);
      term.lease_transitions = t.value_or(0);
    } else {
      r.Unknown("status.leaderTerm", key);
    }
  }
  status->leader_term = std::move(term);
}

}  // namespace

const char* JsonKindName(const Value& v, JsonKindNames names) {
  switch (v.GetType()) {
    case rapidjson::kStringType:
      return "string";
    case rapidjson::kNumberType:
      return names == JsonKindNames::kSchema && v.IsInt64() ? "integer" : "number";
    case rapidjson::kTrueType:
    case rapidjson::kFalseType:
      return names == JsonKindNames::kSchema ? "boolean" : "bool";
    case rapidjson::kArrayType:
      return "array";
    case rapidjson::kObjectType:
      return "object";
    default:
      return "null";
  }
}

void WriteSpec(JsonWriter& w, const LeaseSpec& s, uint32_t fields, const DelegationProof* proof) {
  JsonString(w, "spec");
  w.StartObject();
  if (s.holder_identity && (fields & kSpecHolderIdentity)) {
    JsonField(w, "holderIdentity", *s.holder_identity);
  }
  if (s.lease_duration_seconds && (fields & kSpecLeaseDurationSeconds)) {
    JsonString(w, "leaseDurationSeconds");
    w.Int(*s.lease_duration_seconds);
  }
  if (s.acquire_time_us && (fields & kSpecAcquireTime)) {
    JsonField(w, "acquireTime", base::FormatMicroTime(*s.acquire_time_us));
  }
  if (s.renew_time_us && (fields & kSpecRenewTime)) {
    JsonField(w, "renewTime", base::FormatMicroTime(*s.renew_time_us));
  }
  if (s.lease_transitions && (fields & kSpecLeaseTransitions)) {
    JsonString(w, "leaseTransitions");
    w.Int(*s.lease_transitions);
  }
  if (s.pool_name && (fields & kSpecPoolName)) JsonField(w, "poolName", *s.pool_name);
  if (s.delegate && (fields & kSpecDelegate)) JsonField(w, "delegate", *s.delegate);
  if (proof != nullptr && (fields & kSpecProof)) {
    JsonString(w, "proof");
    w.StartObject();
    JsonField(w, "heartbeat", proof->heartbeat);
    JsonField(w, "certificate", proof->certificate);
    w.EndObject();
  }
  w.EndObject();
}

void WriteStatus(JsonWriter& w, const LeaseStatus& s, const DelegationFields& d) {
  if (!s.observed_time_us && !s.expired && !s.leader_term && !d.HasStatus()) return;
  JsonString(w, "status");
  w.StartObject();
  if (s.observed_time_us) JsonField(w, "observedTime", base::FormatMicroTime(*s.observed_time_us));
  if (s.expired) {
    JsonString(w, "expired");
    w.Bool(true);
  }
  if (s.leader_term) {
    JsonString(w, "leaderTerm");
    w.StartObject();
    JsonField(w, "poolLeaseUID", s.leader_term->pool_lease_uid);
    JsonString(w, "leaseTransitions");
    w.Int(s.leader_term->lease_transitions);
    w.EndObject();
  }
  if (d.accepted_proof) {
    const AcceptedProof& p = *d.accepted_proof;
    JsonString(w, "proof");
    w.StartObject();
    JsonField(w, "bootID", p.boot_id);
    JsonString(w, "sequence");
    w.Int64(p.sequence);
    JsonField(w, "challenge", p.challenge);
    w.EndObject();
  }
  if (!d.challenges.empty()) {
    JsonString(w, "challenges");
    w.StartArray();
    for (const DelegationChallenge& c : d.challenges) {
      w.StartObject();
      JsonField(w, "value", c.value);
      JsonField(w, "issueTime", base::FormatMicroTime(c.issue_time_us));
      w.EndObject();
    }
    w.EndArray();
  }
  w.EndObject();
}

void DecodeSpec(const Value& v, uint32_t fields, LeaseSpec* spec, DelegationFields* delegation,
                DecodeFindings* findings) {
  SchemaReader r(findings);
  if (!r.ObjectAt(v, "spec")) return;
  for (const auto& m : v.GetObject()) {
    std::string_view key = Key(m.name);
    const Value& val = m.value;
    const std::string path = absl::StrCat("spec.", base::Av(key));
    if (!(SpecFieldBit(key) & fields)) {
      r.Unknown("spec", key);
    } else if (key == "holderIdentity") {
      r.OptString(val, path, &spec->holder_identity);
    } else if (key == "leaseDurationSeconds") {
      r.Integer(val, path, &spec->lease_duration_seconds);
    } else if (key == "acquireTime") {
      r.MicroTime(val, path, &spec->acquire_time_us);
    } else if (key == "renewTime") {
      r.MicroTime(val, path, &spec->renew_time_us);
    } else if (key == "leaseTransitions") {
      r.Integer(val, path, &spec->lease_transitions);
    } else if (key == "poolName") {
      r.OptString(val, path, &spec->pool_name);
    } else if (key == "delegate") {
      r.OptString(val, path, &spec->delegate);
    } else if (key == "proof") {
      DecodeProof(r, val, delegation);
    } else {
      r.Unknown("spec", key);
    }
  }
}

void DecodeStatus(const Value& v, LeaseStatus* status, DelegationFields* delegation,
                  DecodeFindings* findings) {
  SchemaReader r(findings);
  if (!r.ObjectAt(v, "status")) return;
  for (const auto& m : v.GetObject()) {
    std::string_view key = Key(m.name);
    const Value& val = m.value;
    const std::string path = absl::StrCat("status.", base::Av(key));
    if (key == "observedTime") {
      r.MicroTime(val, path, &status->observed_time_us);
    } else if (key == "expired") {
      r.Bool(val, path, &status->expired);
    } else if (key == "leaderTerm") {
      DecodeLeaderTerm(r, val, status);
    } else if (key == "proof") {
      DecodeAcceptedProof(r, val, delegation);
    } else if (key == "challenges") {
      DecodeChallenges(r, val, delegation);
    } else {
      r.Unknown("status", key);
    }
  }
}

}  // namespace poolcoord::api
