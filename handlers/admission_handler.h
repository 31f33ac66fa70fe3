// POST /validate-delegated-heartbeat: the validating admission webhook for the
// delegate annotation on coordination.k8s.io/v1 Leases in kube-node-lease
// (docs/architecture.md "The rules").
//
// Wire contract, as kube-apiserver's webhook dispatcher checks it
// (k8s.io/apiserver pkg/admission/plugin/webhook/request):
// - accepts AdmissionReview admission.k8s.io/v1 and v1beta1 and answers 200 with
//   an AdmissionReview of the same apiVersion, echoing request.uid on allow, on
//   deny and on every error that has a uid (then allowed=false, status code 400);
// - never returns patch/patchType;
// - a denial is allowed=false with status {code 403, reason Forbidden, message};
// - malformed JSON, no `request`, no `uid`: HTTP 400 with a metav1.Status;
// - an object that is not a coordination.k8s.io Lease in kube-node-lease, or an
//   operation other than CREATE/UPDATE: allowed, with a warning that nothing was
//   checked;
// - bodies up to 3 MiB (kMaxAdmissionReviewBytes); larger ones get 413.
// The body is read in one pass that keeps only the fields the rules read (no DOM;
// admission_handler.cc, "decoding"), with the grammar, first-member-wins reading
// and error messages (RapidJSON's, with offsets) of the full parse it replaced.
// Decisions are election::DecideDelegatedHeartbeat's, on one consistent read of
// the objects it judges by (store::Store::GetAll: under one lock on the memory
// store, one etcd transaction shared with concurrent reviews on etcd3); a
// failed read denies. Thread-safe; never throws.
#pragma once

#include <cstddef>

#include "election/lease_rules.h"
#include "handlers/http_types.h"
#include "store/store.h"

namespace poolcoord::handlers {

inline constexpr char kAdmissionPath[] = "/validate-delegated-heartbeat";
inline constexpr size_t kMaxAdmissionReviewBytes = 3 * 1024 * 1024;

struct AdmissionOptions {
  store::Store* store = nullptr;                  // not owned
  const election::LeaseRules* rules = nullptr;    // not owned
};

Response ServeAdmissionReview(const Request& req, const AdmissionOptions& opts);

}  // namespace poolcoord::handlers
