// JSON Patch (RFC 6902) operations as the webhook writes them, and the JSON Pointers (RFC 6901)
// they name: "~" and "/" in a key are written "~0" and "~1". Also small read helpers over
// nlohmann::json that never throw: a Kubernetes object is read field by field, and a field of
// an unexpected type reads as absent.
// Thread safety: plain values and pure functions.
#ifndef MISSILE_WEBHOOK_JSON_PATCH_H_
#define MISSILE_WEBHOOK_JSON_PATCH_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "nlohmann/json.hpp"

namespace missile::webhook {

using Json = nlohmann::json;

// A key as it appears in a JSON Pointer: "~" -> "~0", then "/" -> "~1".
std::string EscapePointerToken(std::string_view key);

// A JSON Pointer built one token at a time: JsonPointer().Key("spec").Index(0).str() is
// "/spec/0". The empty pointer is the whole document.
class JsonPointer {
 public:
  JsonPointer Key(std::string_view key) const;
  JsonPointer Index(size_t index) const;
  // "/-": the position after an array's last element (for "add").
  JsonPointer End() const;
  const std::string& str() const { return path_; }

 private:
  std::string path_;
};

// {"op": "add", "path": ..., "value": ...}. On an object member that exists, "add" replaces
// its value; on an array index it inserts.
Json AddOp(const JsonPointer& path, Json value);

// obj[key] when `obj` is an object holding `key`, else nullptr.
const Json* Member(const Json& obj, std::string_view key);
// obj[key] when it is a string, else "".
std::string StringMember(const Json& obj, std::string_view key);
// obj[key] when it is an array, else nullptr.
const Json* ArrayMember(const Json& obj, std::string_view key);
// obj[key] when it is an object, else nullptr.
const Json* ObjectMember(const Json& obj, std::string_view key);

}  // namespace missile::webhook

#endif  // MISSILE_WEBHOOK_JSON_PATCH_H_
