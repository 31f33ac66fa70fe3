// The generic registry store: the verbs of every kind over store::Store, as
// k8s.io/apiserver's registry/generic/registry.Store serves them for a
// cluster-scoped resource: get, list (selectors, limit/continue,
// resourceVersion semantics), create, update of the main resource and of
// /status (preconditions, optimistic concurrency, generation), delete and
// deletecollection (preconditions, finalizers), dry-run for every write. The
// kind's Strategy (strategy.h, which also gives the order of a write's checks)
// decides everything kind-specific. Watch streams are watch_handler.h's.
//
// What is not here: the HTTP edge (query options, body decoding, content
// negotiation, encoding responses) is rest_handler.cc's, as k8s' endpoints
// handlers sit above the registry.
//
// A GenericStore is four pointers: make one per request (ServeResource does).
// Thread-safe; every write is one atomic Store::Update step.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/clock.h"
#include "base/user_info.h"
#include "handlers/list_options.h"
#include "handlers/registry/strategy.h"
#include "store/object.h"
#include "store/store.h"

namespace poolcoord::election {
class LeaseRules;
}  // namespace poolcoord::election

namespace poolcoord::handlers::registry {

// metav1.Preconditions of a delete.
struct Preconditions {
  std::optional<std::string> uid;
  std::optional<int64_t> resource_version;
};

// What an update proposes, from the stored object (rest.UpdatedObjectInfo): a
// PUT returns (a copy of) its body, a PATCH applies itself to `current`. Runs
// inside the store's atomic step, possibly more than once (the etcd3 store
// retries): it must reset whatever it records (e.g. warnings) on each run.
using UpdatedObjectFn =
    std::function<absl::StatusOr<store::MutableObjectPtr>(const store::ObjectPtr& current)>;

// How an update may go beyond PUT's (rest.Update's forceAllowCreate).
struct UpdateOptions {
  // A missing object is created from what `updated(nullptr)` proposes, whatever
  // the strategy's AllowCreateOnUpdate (an apply patch creates, as
  // kube-apiserver's patcher asks the registry to).
  bool create_if_missing = false;
  // The field causes decoding the proposed object found (store::DecodeObject's
  // field_causes: schema type errors, bad times), reported in one 422 with
  // ObjectMeta's and the kind's validation, as kube-apiserver validates a whole
  // object at once. Read after each run of `updated`, which may refill it.
  const std::vector<store::FieldCause>* decode_causes = nullptr;
};

// One page of a list.
struct ListPage {
  std::vector<store::ObjectPtr> items;  // by name
  int64_t revision = 0;                 // metadata.resourceVersion of the list
  std::string continue_token;           // "" on the last page
  int64_t remaining = 0;                // items after this page, with a continue token
};

class GenericStore {
 public:
  // `rules` nullptr: no admission (handler tests). `clock` nullptr: the real clock.
  GenericStore(const Strategy& strategy, store::Store* store, const base::Clock* clock,
               const election::LeaseRules* rules)
      : strategy_(strategy), store_(store), clock_(clock), rules_(rules) {}

  const Strategy& strategy() const { return strategy_; }
  // The server's wall time (for ages in Tables, deletionTimestamp).
  int64_t NowMicros() const;

  // NotFound when absent.
  absl::StatusOr<store::ObjectPtr> Get(const std::string& name) const;

  // Errors, as kube-apiserver's: resourceVersion in the future: 504
  // (ResourceVersionTooLarge); resourceVersionMatch=Exact at another revision,
  // or a continue token older than the watch history: 410 Expired; a token not
  // ours, or a token with a resourceVersion other than "0": 400 (before the 504).
  absl::StatusOr<ListPage> List(const ListOptions& options) const;

  // Creates `object` (its name, or generateName plus 5 random characters).
  // Errors: 422 (ObjectMeta, `decode_causes` as UpdateOptions says, the kind's
  // validation: all of them in one), 409 AlreadyExists, and the rules'
  // 403/409/422/503. Appends the warnings of a create that passed validation
  // (FinalizerWarnings, handlers/validation.h, then the strategy's) to *warnings.
  absl::StatusOr<store::WriteResult> Create(const base::UserInfo& user,
                                            store::MutableObjectPtr object, bool dry_run,
                                            std::vector<std::string>* warnings,
                                            const std::vector<store::FieldCause>& decode_causes = {}) const;

  // The strategy's Precheck (strategy.h) of a write's proposed fields, before
  // its atomic step; nothing without lease rules. Thread-safe.
  void Precheck(const base::UserInfo& user, const store::Object& proposed) const;

  // Updates `name` (or its status) to what `updated` proposes. Errors: 404,
  // whatever `updated` returns, 409 on a stale resourceVersion or another uid,
  // 422 (ObjectMeta, the kind's validation), the rules' errors. Appends the
  // warnings (FinalizerWarnings of the finalizers added, then the strategy's) of a
  // write of the main resource that passed validation. An update that
  // removes the last finalizer of an object being deleted deletes it. The
  // proposed object's metadata.managedFields are kept, also on /status (the
  // field manager has recorded the write in them; handlers/field_manager.h).
  // A created object comes back with WriteResult::created. An update whose
  // object equals the stored one in everything a client can write (spec,
  // metadata, managedFields; on /status, status) writes nothing: the checks
  // still run, and the result is the stored object with its resourceVersion, no
  // watch event (kube-apiserver's store skips a write whose bytes equal the
  // stored ones; the field manager leaves managedFields timestamps alone when a
  // write changes no field). Such a write renews nothing, so the status the
  // rules stamp (election::RenewsLease) stays too.
  absl::StatusOr<store::WriteResult> Update(const base::UserInfo& user, const std::string& name,
                                            Subresource subresource,
                                            const UpdatedObjectFn& updated, bool dry_run,
                                            std::vector<std::string>* warnings,
                                            const UpdateOptions& options = {}) const;

  // Deletes `name`, or with finalizers marks it (deletionTimestamp). Errors: 404,
  // 409 (preconditions), the rules' errors.
  absl::StatusOr<store::WriteResult> Delete(const base::UserInfo& user, const std::string& name,
                                            const Preconditions& preconditions,
                                            bool dry_run) const;

  // Deletes every object the selectors of `options` match, one atomic delete
  // each; objects gone meanwhile are skipped, any other error ends the call.
  // Returns what was deleted (or marked), and the revision after.
  absl::StatusOr<ListPage> DeleteCollection(const base::UserInfo& user,
                                            const ListOptions& options,
                                            const Preconditions& preconditions,
                                            bool dry_run) const;

 private:
  WriteContext Context(const base::UserInfo& user) const { return {user, rules_}; }
  // Server metadata and the strategy's normalization of a new object.
  void PrepareCreate(const WriteContext& ctx, store::Object& object) const;
  // The checks of a create inside the atomic step: CheckWriter, Validate,
  // warnings, Canonicalize, Admit (strategy.h).
  absl::Status AdmitCreate(const WriteContext& ctx, store::Object& object,
                           store::TxnReader& reader, std::vector<std::string>* warnings,
                           const std::vector<store::FieldCause>* decode_causes) const;
  absl::StatusOr<store::MutableObjectPtr> BeforeUpdate(const WriteContext& ctx,
                                                       const store::ObjectPtr& current,
                                                       store::MutableObjectPtr proposed,
                                                       Subresource subresource,
                                                       store::TxnReader& reader,
                                                       std::vector<std::string>* warnings,
                                                       const std::vector<store::FieldCause>* decode_causes,
                                                       bool* unchanged) const;

  const Strategy& strategy_;
  store::Store* store_;
  const base::Clock* clock_;
  const election::LeaseRules* rules_;
};

}  // namespace poolcoord::handlers::registry
