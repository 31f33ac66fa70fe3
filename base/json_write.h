// RapidJSON's writers fed std::string_views: RapidJSON takes a pointer and a
// SizeType length, so every JSON encoder (store/object_codec.cc, the handlers'
// discovery, table and OpenAPI writers) wrapped the same cast. Header-only,
// for any rapidjson::Writer or PrettyWriter; as thread-safe as the writer.
#pragma once

#include <string_view>

#include "rapidjson/rapidjson.h"

namespace poolcoord::base {

// `s` as a JSON string value (escaped by the writer).
template <typename Writer>
void JsonString(Writer& w, std::string_view s) {
  w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
}

// `s` as an object member's name.
template <typename Writer>
void JsonKey(Writer& w, std::string_view s) {
  w.Key(s.data(), static_cast<rapidjson::SizeType>(s.size()));
}

// The member "key": "value".
template <typename Writer>
void JsonField(Writer& w, std::string_view key, std::string_view value) {
  JsonKey(w, key);
  JsonString(w, value);
}

}  // namespace poolcoord::base
