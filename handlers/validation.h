// Name, label and ObjectMeta validation with Kubernetes' own messages
// (k8s.io/apimachinery/pkg/util/validation and pkg/api/validation/objectmeta.go),
// so that a 422 from us reads like one from kube-apiserver.
//
// The Is* functions return one message per failed rule (empty: valid), worded as
// apimachinery words them; the Validate* functions return FieldCauses ready for
// store::InvalidError. All functions are pure and thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/k8s_names.h"
#include "store/api_error.h"
#include "store/object.h"

namespace poolcoord::handlers {

// The name rules live in base/k8s_names.h (the membership file judges names too).
using base::IsDNS1123Subdomain;
using base::IsQualifiedName;
using base::IsValidLabelValue;
using base::kDNS1123SubdomainMaxLength;
using base::kLabelValueMaxLength;
using base::kQualifiedNameMaxLength;
// Total bytes of annotation keys plus values (apimachinery TotalAnnotationSizeLimitB).
inline constexpr size_t kTotalAnnotationSizeLimitBytes = 256 * 1024;

// Validates the client-settable metadata of a create (is_create) or of the new
// object of an update, as ValidateObjectMetaAccessor does for a cluster-scoped
// kind. Fields are reported as "metadata.name", "metadata.generateName",
// "metadata.labels", "metadata.annotations", "metadata.finalizers",
// "metadata.generation":
// - name: required, except on create when generateName is set (the caller then
//   generates it); otherwise a DNS-1123 subdomain;
// - generateName: a DNS-1123 subdomain once a trailing '-' is masked;
// - labels: keys qualified names, values label values;
// - annotations: keys qualified names (case-insensitive), keys plus values at most
//   262144 bytes in total (FieldTooLong, "may not be more than 262144 bytes", the
//   value left out as field.TooLong's ErrorBody leaves it out);
// - finalizers: qualified names, and not both "orphan" and "foregroundDeletion".
// Bad values are quoted whole in the causes (a 1 MB name is quoted twice in the
// 422's message and once in its cause, ~4 MB with details.name), as kube-apiserver
// 1.32.6 answers: field.Invalid's ErrorBody omits no value, only TooLong's does.
std::vector<store::FieldCause> ValidateObjectMeta(const store::ObjectMeta& meta, bool is_create);

// The Warning texts for the finalizers a write adds that name no domain (no
// '/'), as kube-apiserver 1.32.6 warns on every create and update of a custom
// resource (apiextensions-apiserver's strategy), a write that passed validation,
// dry runs included:
//   metadata.finalizers: "foo": prefer a domain-qualified finalizer name to avoid
//   accidental conflicts with other finalizer writers
// with "... finalizer name including a path (/) to avoid ..." for a name with a
// '.' (e.g. "example.com"). Added: in `finalizers` and not in `old_finalizers`
// (nullptr on create: all of them). The standard finalizers "kubernetes",
// "orphan" and "foregroundDeletion" draw none. One text per name, in byte order
// of the names. Nothing allocated when no finalizer is added.
std::vector<std::string> FinalizerWarnings(const std::vector<std::string>& finalizers,
                                           const std::vector<std::string>* old_finalizers);

// The update rules of ValidateObjectMetaAccessorUpdate that a caller cannot repair
// by copying server-set fields (uid, creationTimestamp, generation, deletion
// fields are copied by the caller, as k8s.io/apiserver's rest.BeforeUpdate does):
// - metadata.name is immutable (the name in the URL wins);
// - metadata.uid is immutable when the new object sets one;
// - while the old object is being deleted (deletionTimestamp set) no finalizer may
//   be added (Forbidden); removing finalizers is allowed.
// Only the update rules: validate the new object itself with
// ValidateObjectMeta(new_meta, /*is_create=*/false) as well (apimachinery's
// update validation also runs the label and annotation checks; here they live in
// that one place so that calling both reports each problem once).
std::vector<store::FieldCause> ValidateObjectMetaUpdate(const store::ObjectMeta& old_meta,
                                                        const store::ObjectMeta& new_meta);

}  // namespace poolcoord::handlers
