// A double-quoted string literal valid in both JSON and TOML (basic string): quotes,
// backslashes, newlines and tabs escaped by name, other control characters and DEL as \uXXXX.
// Thread-safety: pure.
#ifndef MISSILE_COMMON_QUOTE_H_
#define MISSILE_COMMON_QUOTE_H_

#include <string>
#include <string_view>

namespace missile {

std::string QuoteString(std::string_view s);

}  // namespace missile

#endif  // MISSILE_COMMON_QUOTE_H_
