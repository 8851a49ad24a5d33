#include "json_patch.h"

#include <utility>

namespace missile::webhook {

std::string EscapePointerToken(std::string_view key) {
  std::string out;
  out.reserve(key.size());
  for (char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

JsonPointer JsonPointer::Key(std::string_view key) const {
  JsonPointer p = *this;
  p.path_ += "/" + EscapePointerToken(key);
  return p;
}

JsonPointer JsonPointer::Index(size_t index) const {
  JsonPointer p = *this;
  p.path_ += "/" + std::to_string(index);
  return p;
}

JsonPointer JsonPointer::End() const {
  JsonPointer p = *this;
  p.path_ += "/-";
  return p;
}

Json AddOp(const JsonPointer& path, Json value) {
  return Json{{"op", "add"}, {"path", path.str()}, {"value", std::move(value)}};
}

const Json* Member(const Json& obj, std::string_view key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

std::string StringMember(const Json& obj, std::string_view key) {
  const Json* v = Member(obj, key);
  return v != nullptr && v->is_string() ? v->get<std::string>() : std::string();
}

const Json* ArrayMember(const Json& obj, std::string_view key) {
  const Json* v = Member(obj, key);
  return v != nullptr && v->is_array() ? v : nullptr;
}

const Json* ObjectMember(const Json& obj, std::string_view key) {
  const Json* v = Member(obj, key);
  return v != nullptr && v->is_object() ? v : nullptr;
}

}  // namespace missile::webhook
