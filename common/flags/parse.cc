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

// `name` ("--out") among the options of `app` and of its commands.
const CLI::Option* FindOption(const CLI::App& app, const std::string& name) {
  if (const CLI::Option* option = app.get_option_no_throw(name)) return option;
  for (const CLI::App* command : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (const CLI::Option* option = FindOption(*command, name)) return option;
  }
  return nullptr;
}

// "(status, tenants or set; try --help)": the commands a mistyped one could have been.
std::string CommandList(const std::vector<std::string>& names) {
  std::string list;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) list += i + 1 == names.size() ? " or " : ", ";
    list += names[i];
  }
  return " (" + list + "; try --help)";
}

// The first argument `app` itself (not its commands) took no meaning from, as a reason that
// starts with `prefix`.
absl::Status Extras(const CLI::App& app, const std::string& prefix) {
  const std::vector<std::string> extras = app.remaining();
  if (extras.empty()) return absl::OkStatus();
  const std::string& first = extras.front();
  const std::vector<const CLI::App*> commands =
      app.get_subcommands([](const CLI::App*) { return true; });
  if (!first.starts_with("-") && !commands.empty()) {
    std::vector<std::string> names, listed;
    for (const CLI::App* command : commands) {
      names.push_back(command->get_name());
      if (!command->get_group().empty()) listed.push_back(command->get_name());
    }
    const std::string suggestion =
        DidYouMean(first, std::vector<std::string_view>(names.begin(), names.end()));
    return Invalid(prefix + "unknown command '" + first + "'" +
                   (suggestion.empty() ? CommandList(listed) : suggestion));
  }
  if (!first.starts_with("-") || first == "-") {
    return Invalid(prefix + "unexpected argument '" + first + "'");
  }
  const std::string flag = first.substr(0, first.find('='));
  const std::vector<std::string> names = OptionNames(app);
  return Invalid(prefix + "unknown option '" + flag + "'" +
                 DidYouMean(flag, std::vector<std::string_view>(names.begin(), names.end())));
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
                                    ? FindOption(app, it->substr(0, it->size() - 1))
                                    : nullptr;
    if (option != nullptr && option->get_items_expected_max() == 0) {
      return Invalid(it->substr(0, it->size() - 1) + " takes no value");  // CLI11 lets it pass
    }
    if (option != nullptr) {
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
  if (absl::Status s = Extras(app, ""); !s.ok()) return s;
  for (const CLI::App* command : app.get_subcommands()) {
    if (absl::Status s = Extras(*command, command->get_name() + ": "); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status ParseThenRest(CLI::App& app, const std::vector<std::string>& args,
                           std::vector<std::string>& rest) {
  size_t end = 0;
  while (end < args.size()) {
    const std::string& arg = args[end];
    if (arg == "--") break;
    if (!arg.starts_with("-") || arg == "-") break;
    ++end;
    if (arg.find('=') != std::string::npos) continue;
    const CLI::Option* option = app.get_option_no_throw(arg);
    if (option != nullptr && option->get_items_expected_max() > 0 && end < args.size()) ++end;
  }
  const auto split = args.begin() + static_cast<std::ptrdiff_t>(end);
  rest.assign(split != args.end() && *split == "--" ? split + 1 : split, args.end());
  return Parse(app, std::vector<std::string>(args.begin(), split));
}

CLI::App* AddCommand(CLI::App& app, const std::string& name, bool listed) {
  app.require_subcommand(0, 1);  // a second command word is an unexpected argument
  CLI::App* command = app.add_subcommand(name);
  Configure(*command);
  if (!listed) command->group("");
  return command;
}

absl::Status GivenOnce(const std::vector<const CLI::Option*>& spellings) {
  size_t count = 0;
  for (const CLI::Option* option : spellings) count += option->count();
  if (count <= 1) return absl::OkStatus();
  return Invalid(spellings.front()->get_name() + " given twice");
}
}  // namespace missile::flags
