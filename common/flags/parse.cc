#include "missile/flags/parse.h"

#include <regex>
#include <string_view>

#include "missile/flags/suggest.h"

namespace missile::flags {
namespace {

absl::Status Invalid(const std::string& reason) { return absl::InvalidArgumentError(reason); }

// CLI11 2.1 says "--config: 1 required TEXT missing" for an option at the end without a value,
// and "json was given a disallowed flag override" for "--json=yes".
absl::Status FromMismatch(const std::string& what) {
  static const std::regex kMissing(R"(^(\S+): \d+ required .* missing$)");
  static const std::regex kOverride(R"(^(\S+) was given a disallowed flag override$)");
  std::smatch m;
  if (std::regex_match(what, m, kMissing)) return Invalid(m[1].str() + " needs a value");
  if (std::regex_match(what, m, kOverride)) {
    const std::string name = m[1].str();
    return Invalid((name.starts_with("-") ? name : "--" + name) + " takes no value");
  }
  return Invalid(what);
}

}  // namespace

void Configure(CLI::App& app) {
  app.set_help_flag();  // no CLI11 help: the tool prints its own usage
  app.allow_extras();   // unknown arguments are reported by Parse, with a suggestion
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.option_defaults()->disable_flag_override();
}

std::vector<std::string> OptionNames(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::Option* option : app.get_options()) {
    for (const std::string& name : option->get_lnames()) names.push_back("--" + name);
    for (const std::string& name : option->get_snames()) names.push_back("-" + name);
  }
  return names;
}

absl::Status Parse(CLI::App& app, const std::vector<std::string>& args) {
  // CLI11 pops arguments from the back. It reads "--out=" as "--out" without a value; split, it
  // is "--out" with an empty one, which the tool judges ("--out: empty directory").
  std::vector<std::string> reversed;
  for (auto it = args.rbegin(); it != args.rend(); ++it) {
    const CLI::Option* option = it->size() > 3 && it->starts_with("--") && it->ends_with("=")
                                    ? app.get_option_no_throw(it->substr(0, it->size() - 1))
                                    : nullptr;
    if (option != nullptr && option->get_type_size_max() > 0) {
      reversed.push_back("");
      reversed.push_back(it->substr(0, it->size() - 1));
    } else {
      reversed.push_back(*it);
    }
  }
  try {
    app.parse(reversed);
  } catch (const CLI::ArgumentMismatch& e) {
    return FromMismatch(e.what());
  } catch (const CLI::ParseError& e) {
    return Invalid(e.what());
  }
  const std::vector<std::string> extras = app.remaining();
  if (extras.empty()) return absl::OkStatus();
  const std::string& first = extras.front();
  if (!first.starts_with("-") || first == "-")
    return Invalid("unexpected argument '" + first + "'");
  const std::string flag = first.substr(0, first.find('='));
  const std::vector<std::string> names = OptionNames(app);
  return Invalid("unknown option '" + flag + "'" +
                 DidYouMean(flag, std::vector<std::string_view>(names.begin(), names.end())));
}

}  // namespace missile::flags
