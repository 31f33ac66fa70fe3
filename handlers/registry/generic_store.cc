#include "handlers/registry/generic_store.h"

#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "handlers/validation.h"
#include "store/api_error.h"

namespace poolcoord::handlers::registry {
namespace {

using store::MutableObjectPtr;
using store::Object;
using store::ObjectPtr;

std::string RandomUid() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  uint64_t hi = rng(), lo = rng();
  hi = (hi & 0xffffffffffff0fffULL) | 0x0000000000004000ULL;  // version 4
  lo = (lo & 0x3fffffffffffffffULL) | 0x8000000000000000ULL;  // RFC 4122 variant
  return absl::StrFormat("%08x-%04x-%04x-%04x-%012x", hi >> 32, (hi >> 16) & 0xffff, hi & 0xffff,
                         lo >> 48, lo & 0xffffffffffffULL);
}

// As k8s.io/apiserver's names.SimpleNameGenerator: 5 characters from an alphabet
// without vowels and look-alike digits.
std::string RandomSuffix() {
  static constexpr char kAlphabet[] = "bcdfghjklmnpqrstvwxz2456789";
  thread_local std::mt19937 rng{std::random_device{}()};
  std::string s(5, ' ');
  for (char& c : s) c = kAlphabet[rng() % (sizeof(kAlphabet) - 1)];
  return s;
}

absl::Status Invalid(const Strategy& strategy, const std::string& name,
                     std::vector<store::FieldCause> causes) {
  return store::InvalidError(strategy.Info().kind_name, name, std::move(causes));
}

// The decoder's causes, then the kind's on fields the decoder did not already
// report (a field it left unset would be "Required" there too): every field
// error of the object in one 422.
std::vector<store::FieldCause> WithDecodeCauses(const std::vector<store::FieldCause>* decoded,
                                                std::vector<store::FieldCause> kind_causes) {
  if (decoded == nullptr || decoded->empty()) return kind_causes;
  std::vector<store::FieldCause> out = *decoded;
  for (store::FieldCause& c : kind_causes) {
    bool covered = false;
    for (const store::FieldCause& d : *decoded) {
      covered |= c.field == d.field ||
                 (c.field.size() > d.field.size() && c.field.compare(0, d.field.size(), d.field) == 0 &&
                  c.field[d.field.size()] == '.');
    }
    if (!covered) out.push_back(std::move(c));
  }
  return out;
}

// ObjectMeta's causes, then the decoder's.
std::vector<store::FieldCause> MetaAndDecodeCauses(std::vector<store::FieldCause> meta,
                                                   const std::vector<store::FieldCause>* decoded) {
  if (decoded != nullptr) meta.insert(meta.end(), decoded->begin(), decoded->end());
  return meta;
}

void Append(std::vector<std::string>* to, std::vector<std::string> more) {
  to->insert(to->end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
}

}  // namespace

int64_t GenericStore::NowMicros() const {
  return (clock_ ? clock_ : base::RealClock::Get())->NowMicros();
}

absl::StatusOr<ObjectPtr> GenericStore::Get(const std::string& name) const {
  return store_->Get(strategy_.kind(), name);
}

absl::StatusOr<ListPage> GenericStore::List(const ListOptions& opts) const {
  const store::Kind kind = strategy_.kind();
  if (!opts.continue_token.empty() && opts.resource_version.value_or(0) != 0) {
    // The token carries the list's revision: kube-apiserver's storage
    // (storage.ValidateListOptions) refuses another one, after the token's own check.
    int64_t token_revision = 0;
    std::string start_name;
    RETURN_IF_ERROR(DecodeContinueToken(opts.continue_token, &token_revision, &start_name));
    return store::BadRequestError("specifying resource version is not allowed when using continue");
  }
  const int64_t current = store_->CurrentRevision();
  if (opts.resource_version && *opts.resource_version > current) {
    return store::TimeoutError(
        absl::StrCat("Too large resource version: ", *opts.resource_version, ", current: ", current),
        true);
  }
  if (opts.resource_version_match == ResourceVersionMatch::kExact &&
      *opts.resource_version != current) {
    // The memory store keeps no past states, only past events.
    return store::ExpiredError(
        absl::StrCat("too old resource version: ", *opts.resource_version, " (", current, ")"));
  }
  store::ListOptions lo;
  int64_t token_revision = 0;
  if (!opts.continue_token.empty()) {
    RETURN_IF_ERROR(DecodeContinueToken(opts.continue_token, &token_revision, &lo.after_name));
    if (token_revision < store_->OldestWatchableRevision() - 1) {
      return store::ExpiredError(
          "The provided continue parameter is too old to display a consistent list result. You "
          "can start a new list without the continue parameter.");
    }
    // Every page of one list at the first page's revision, as kube-apiserver's
    // etcd3 store continues a list: a consistent snapshot, and a token's
    // revision checked by the store (future: 504 too large; gone: 410).
    lo.at_revision = token_revision;
  }
  lo.limit = opts.limit;
  lo.predicate = [&opts](const Object& o) { return MatchesSelectors(opts, o); };
  store::ListResult result;
  if (auto exact = opts.field_selector.ExactName(); exact && lo.after_name.empty()) {
    // kubectl wait and delete watch one object by name: no need to scan.
    auto obj = store_->Get(kind, *exact);
    result.revision = store_->CurrentRevision();
    if (obj.ok() && MatchesSelectors(opts, **obj)) result.items.push_back(*obj);
  } else {
    ASSIGN_OR_RETURN(result, store_->List(kind, lo));
  }
  ListPage page;
  // Pages after the first report the revision of the first page, as a list
  // continued from an etcd snapshot does; later changes reach a watcher from it.
  page.revision = token_revision ? token_revision : result.revision;
  if (!result.next_name.empty() && !result.items.empty()) {
    page.continue_token = EncodeContinueToken(page.revision, result.items.back()->metadata.name);
    page.remaining = result.remaining;
  }
  page.items = std::move(result.items);
  return page;
}

void GenericStore::PrepareCreate(const WriteContext& ctx, Object& obj) const {
  // Server metadata, as k8s.io/apiserver's rest.BeforeCreate fills it; a
  // resourceVersion on create is ignored.
  obj.metadata.resource_version = 0;
  obj.metadata.uid = RandomUid();
  obj.metadata.creation_timestamp = NowMicros() / 1000000;
  obj.metadata.generation = 1;
  obj.metadata.deletion_timestamp.reset();
  obj.metadata.deletion_grace_period_seconds.reset();
  strategy_.PrepareForCreate(ctx, obj);
}

absl::Status GenericStore::AdmitCreate(const WriteContext& ctx, Object& next,
                                       store::TxnReader& reader,
                                       std::vector<std::string>* warnings,
                                       const std::vector<store::FieldCause>* decode_causes) const {
  if (rules_) RETURN_IF_ERROR(strategy_.CheckWriter(ctx, next));
  if (auto causes = WithDecodeCauses(decode_causes, strategy_.Validate(ctx, next)); !causes.empty()) {
    return Invalid(strategy_, next.metadata.name, std::move(causes));
  }
  *warnings = FinalizerWarnings(next.metadata.finalizers, nullptr);
  Append(warnings, strategy_.WarningsOnCreate(ctx, next));
  strategy_.Canonicalize(next);
  if (rules_) RETURN_IF_ERROR(strategy_.Admit(ctx, nullptr, next, reader));
  return absl::OkStatus();
}

void GenericStore::Precheck(const base::UserInfo& user, const Object& proposed) const {
  if (rules_) strategy_.Precheck(Context(user), proposed);
}

absl::StatusOr<store::WriteResult> GenericStore::Create(
    const base::UserInfo& user, MutableObjectPtr obj, bool dry_run,
    std::vector<std::string>* warnings, const std::vector<store::FieldCause>& decode_causes) const {
  const WriteContext ctx = Context(user);
  if (obj->metadata.name.empty() && !obj->metadata.generate_name.empty()) {
    // As apiserver's SimpleNameGenerator: the prefix cut to 58 characters, so a
    // generated name is at most 63 (a label value, a pool's name).
    obj->metadata.name = obj->metadata.generate_name.substr(0, 58) + RandomSuffix();
  }
  if (auto causes = ValidateObjectMeta(obj->metadata, /*is_create=*/true); !causes.empty()) {
    return Invalid(strategy_, obj->metadata.name,
                   MetaAndDecodeCauses(std::move(causes), &decode_causes));
  }
  PrepareCreate(ctx, *obj);
  const std::string name = obj->metadata.name;
  std::vector<std::string> strategy_warnings;
  auto result = store_->Update(
      strategy_.kind(), name,
      [&](const ObjectPtr& current, store::TxnReader& reader) -> absl::StatusOr<MutableObjectPtr> {
        if (current) return store::AlreadyExistsError(strategy_.Info().plural, name);
        auto next = std::make_shared<Object>(*obj);
        RETURN_IF_ERROR(AdmitCreate(ctx, *next, reader, &strategy_warnings, &decode_causes));
        return next;
      },
      dry_run);
  if (result.ok()) Append(warnings, std::move(strategy_warnings));
  return result;
}

absl::StatusOr<MutableObjectPtr> GenericStore::BeforeUpdate(
    const WriteContext& ctx, const ObjectPtr& current, MutableObjectPtr proposed,
    Subresource subresource, store::TxnReader& reader, std::vector<std::string>* warnings,
    const std::vector<store::FieldCause>* decode_causes, bool* unchanged) const {
  const store::ResourceInfo& info = strategy_.Info();
  const std::string& name = current->metadata.name;
  if (proposed->metadata.resource_version == 0 && !strategy_.AllowUnconditionalUpdate()) {
    return Invalid(strategy_, name,
                   {store::FieldInvalid("metadata.resourceVersion", "0x0",
                                        "must be specified for an update")});
  }
  if (proposed->metadata.resource_version != 0 &&
      proposed->metadata.resource_version != current->metadata.resource_version) {
    return store::StaleResourceVersionError(info.plural, name);
  }
  if (!proposed->metadata.uid.empty() && proposed->metadata.uid != current->metadata.uid) {
    return store::ConflictError(
        info.plural, name,
        absl::StrCat("Precondition failed: UID in precondition: ", proposed->metadata.uid,
                     ", UID in object meta: ", current->metadata.uid));
  }
  MutableObjectPtr next = std::move(proposed);
  if (subresource == Subresource::kStatus) {
    // /status changes status alone (and the managedFields that record it), as
    // metav1.ResetObjectMetaForStatus and the kind's status strategy keep the rest.
    if (decode_causes != nullptr && !decode_causes->empty()) {
      return Invalid(strategy_, name, *decode_causes);
    }
    store::ManagedFields managed_fields = std::move(next->metadata.managed_fields);
    next->metadata = current->metadata;
    next->metadata.managed_fields = std::move(managed_fields);
    strategy_.PrepareForUpdate(ctx, subresource, *next, *current);
  } else {
    strategy_.PrepareForUpdate(ctx, subresource, *next, *current);
    auto causes = ValidateObjectMeta(next->metadata, /*is_create=*/false);
    auto update_causes = ValidateObjectMetaUpdate(current->metadata, next->metadata);
    causes.insert(causes.end(), update_causes.begin(), update_causes.end());
    if (!causes.empty()) return Invalid(strategy_, name, MetaAndDecodeCauses(std::move(causes), decode_causes));
  }
  // Server-owned metadata: never writable through any API (rest.BeforeUpdate).
  next->metadata.name = name;
  next->metadata.uid = current->metadata.uid;
  next->metadata.creation_timestamp = current->metadata.creation_timestamp;
  next->metadata.deletion_timestamp = current->metadata.deletion_timestamp;
  next->metadata.deletion_grace_period_seconds = current->metadata.deletion_grace_period_seconds;
  next->metadata.generate_name = current->metadata.generate_name;
  next->metadata.resource_version = current->metadata.resource_version;
  const bool same_spec = next->spec == current->spec;
  next->metadata.generation = current->metadata.generation + (same_spec ? 0 : 1);
  {
    const store::ObjectMeta& a = next->metadata;
    const store::ObjectMeta& b = current->metadata;
    *unchanged = same_spec && a.labels == b.labels &&
                 a.annotations == b.annotations && a.finalizers == b.finalizers &&
                 a.owner_references_json == b.owner_references_json &&
                 a.managed_fields == b.managed_fields &&
                 (subresource == Subresource::kMain || store::SameStatus(*next, *current));
  }
  if (subresource == Subresource::kStatus) {
    if (rules_) RETURN_IF_ERROR(strategy_.AdmitStatusUpdate(ctx, *current, *next));
  } else {
    if (rules_) RETURN_IF_ERROR(strategy_.CheckWriter(ctx, *next));
    if (auto causes = WithDecodeCauses(decode_causes, strategy_.ValidateUpdate(ctx, *next, *current));
        !causes.empty()) {
      return Invalid(strategy_, name, std::move(causes));
    }
    *warnings = FinalizerWarnings(next->metadata.finalizers, &current->metadata.finalizers);
    Append(warnings, strategy_.WarningsOnUpdate(ctx, *next, *current));
    strategy_.Canonicalize(*next);
    if (rules_) RETURN_IF_ERROR(strategy_.Admit(ctx, current, *next, reader));
  }
  // The update that removes the last finalizer of an object being deleted
  // completes the delete.
  if (next->metadata.deletion_timestamp && next->metadata.finalizers.empty()) return nullptr;
  return next;
}

absl::StatusOr<store::WriteResult> GenericStore::Update(const base::UserInfo& user,
                                                        const std::string& name,
                                                        Subresource subresource,
                                                        const UpdatedObjectFn& updated,
                                                        bool dry_run,
                                                        std::vector<std::string>* warnings,
                                                        const UpdateOptions& options) const {
  const WriteContext ctx = Context(user);
  std::vector<std::string> strategy_warnings;
  bool created = false;
  ObjectPtr unchanged_object;
  // Aborts the store's step when there is nothing to write.
  static const absl::Status kNothingToWrite = absl::CancelledError("poolcoord: nothing to write");
  auto result = store_->Update(
      strategy_.kind(), name,
      [&](const ObjectPtr& current, store::TxnReader& reader) -> absl::StatusOr<MutableObjectPtr> {
        strategy_warnings.clear();
        created = false;
        unchanged_object = nullptr;
        if (!current) {
          if ((!strategy_.AllowCreateOnUpdate() && !options.create_if_missing) ||
              subresource != Subresource::kMain) {
            return store::NotFoundError(strategy_.Info().plural, name);
          }
          // A PUT of a missing object creates it, as a create would.
          ASSIGN_OR_RETURN(MutableObjectPtr obj, updated(nullptr));
          if (auto causes = ValidateObjectMeta(obj->metadata, /*is_create=*/true); !causes.empty()) {
            return Invalid(strategy_, name, MetaAndDecodeCauses(std::move(causes), options.decode_causes));
          }
          PrepareCreate(ctx, *obj);
          RETURN_IF_ERROR(AdmitCreate(ctx, *obj, reader, &strategy_warnings, options.decode_causes));
          created = true;
          return obj;
        }
        ASSIGN_OR_RETURN(MutableObjectPtr proposed, updated(current));
        bool unchanged = false;
        ASSIGN_OR_RETURN(MutableObjectPtr next,
                         BeforeUpdate(ctx, current, std::move(proposed), subresource, reader,
                                      &strategy_warnings, options.decode_causes, &unchanged));
        if (unchanged && next) {
          unchanged_object = current;
          return kNothingToWrite;
        }
        return next;
      },
      dry_run);
  if (!result.ok() && unchanged_object && result.status() == kNothingToWrite) {
    result = store::WriteResult{unchanged_object};
  }
  if (result.ok()) {
    result->created = created;
    Append(warnings, std::move(strategy_warnings));
  }
  return result;
}

absl::StatusOr<store::WriteResult> GenericStore::Delete(const base::UserInfo& user,
                                                        const std::string& name,
                                                        const Preconditions& pre,
                                                        bool dry_run) const {
  const WriteContext ctx = Context(user);
  const char* plural = strategy_.Info().plural;
  return store_->Update(
      strategy_.kind(), name,
      [&](const ObjectPtr& current, store::TxnReader& reader) -> absl::StatusOr<MutableObjectPtr> {
        if (!current) return store::NotFoundError(plural, name);
        if (pre.uid && *pre.uid != current->metadata.uid) {
          return store::ConflictError(
              plural, name,
              absl::StrCat("Precondition failed: UID in precondition: ", *pre.uid,
                           ", UID in object meta: ", current->metadata.uid));
        }
        if (pre.resource_version && *pre.resource_version != current->metadata.resource_version) {
          return store::ConflictError(
              plural, name,
              absl::StrCat("Precondition failed: ResourceVersion in precondition: ",
                           *pre.resource_version, ", ResourceVersion in object meta: ",
                           current->metadata.resource_version));
        }
        if (rules_) RETURN_IF_ERROR(strategy_.AdmitDelete(ctx, *current, reader));
        if (current->metadata.finalizers.empty()) return MutableObjectPtr();
        // Finalizers hold the object: mark it, and the update that removes the
        // last finalizer completes the delete.
        auto next = std::make_shared<Object>(*current);
        if (!next->metadata.deletion_timestamp) {
          next->metadata.deletion_timestamp = NowMicros() / 1000000;
          next->metadata.deletion_grace_period_seconds = 0;
        }
        return next;
      },
      dry_run);
}

absl::StatusOr<ListPage> GenericStore::DeleteCollection(const base::UserInfo& user,
                                                        const ListOptions& options,
                                                        const Preconditions& pre,
                                                        bool dry_run) const {
  store::ListOptions lo;
  lo.predicate = [&options](const Object& o) { return MatchesSelectors(options, o); };
  ASSIGN_OR_RETURN(store::ListResult listed, store_->List(strategy_.kind(), lo));
  ListPage deleted;
  for (const auto& item : listed.items) {
    auto r = Delete(user, item->metadata.name, pre, dry_run);
    if (r.ok()) {
      deleted.items.push_back(r->object);
    } else if (!absl::IsNotFound(r.status())) {
      return r.status();
    }
  }
  deleted.revision = store_->CurrentRevision();
  return deleted;
}

}  // namespace poolcoord::handlers::registry
