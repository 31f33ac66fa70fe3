// The kinds of coordination.pool/v1alpha1: one Strategy per kind (strategy.h),
// listed once in registry.cc, in the order discovery and OpenAPI show them.
// Everything that serves "every kind" (discovery, OpenAPI, routing, Table,
// selectors) iterates or looks up this list; nothing else names the kinds.
//
// The list is built on first use (thread-safe); kinds the store does not know
// yet are registered with it then (store::RegisterResource). Lookups are
// thread-safe.
#pragma once

#include <span>
#include <string_view>

#include "handlers/registry/strategy.h"
#include "store/object.h"

namespace poolcoord::handlers::registry {

// Every kind, in registration order.
std::span<const Strategy* const> AllKinds();

// The strategy of `kind`. `kind` must be registered (every store::Kind an object
// can carry is).
const Strategy& ForKind(store::Kind kind);

// nullptr when `plural` names no kind of ours.
const Strategy* ForPlural(std::string_view plural);

}  // namespace poolcoord::handlers::registry
