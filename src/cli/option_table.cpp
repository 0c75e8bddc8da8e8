// Option registration, TOML application and printing.
#include "cli/option_table.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <limits>
#include <map>
#include <toml++/toml.h>

#include "core/error.hpp"

namespace strata {

namespace {

// CLI11 saturates an integer that does not fit (99999999999999999999 becomes 2^63 - 1): the text
// is checked against the target's range first.
template <class T>
CLI::Validator fits_in() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        T value{};
        const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (ec == std::errc::result_out_of_range) {
          return fmt::format("{} is out of range ({} .. {})", text, std::numeric_limits<T>::min(),
                             std::numeric_limits<T>::max());
        }
        return std::string();  // anything else is CLI11's conversion to judge
      },
      "", "integer range");
}

std::string normalise_key(std::string key) {
  std::replace(key.begin(), key.end(), '_', '-');
  return key;
}

const OptionSpec* find_spec(const std::vector<OptionSpec>& specs, const std::string& key) {
  for (const auto& s : specs) {
    if (s.name == key) return &s;
  }
  return nullptr;
}

bool is_group(const std::vector<OptionSpec>& specs, const std::string& key) {
  return std::any_of(specs.begin(), specs.end(), [&](const OptionSpec& s) { return s.group == key; });
}

void assign(const std::string& path, const std::string& key, const toml::node& node, const OptionSpec& spec) {
  std::visit(
      [&](auto* target) {
        using T = std::remove_pointer_t<decltype(target)>;
        if constexpr (std::is_same_v<T, bool>) {
          STRATA_REQUIRE(node.is_boolean(), "{}: '{}' must be true or false", path, key);
          *target = *node.value<bool>();
        } else if constexpr (std::is_same_v<T, std::string>) {
          // An integer is its decimal text: a switch such as overlap = 1 reads as "1".
          if (node.is_integer()) {
            *target = std::to_string(*node.value<std::int64_t>());
          } else {
            const auto v = node.value<std::string>();
            STRATA_REQUIRE(v.has_value(), "{}: '{}' must be a string", path, key);
            *target = *v;
          }
        } else if constexpr (std::is_same_v<T, double>) {
          STRATA_REQUIRE(node.is_number(), "{}: '{}' must be a number", path, key);
          *target = *node.value<double>();
        } else {
          STRATA_REQUIRE(node.is_integer(), "{}: '{}' must be an integer", path, key);
          const std::int64_t v = *node.value<std::int64_t>();
          STRATA_REQUIRE(v >= std::numeric_limits<T>::min() && v <= std::numeric_limits<T>::max(),
                         "{}: '{}' = {} is out of range", path, key, v);
          *target = static_cast<T>(v);
        }
      },
      spec.target);
}

}  // namespace

std::string renamed_option(std::string_view name) {
  constexpr std::pair<std::string_view, std::string_view> kRenamed[] = {{"save-every", "checkpoint-every"}};
  for (const auto& [old_name, new_name] : kRenamed) {
    if (name == old_name) return std::string(new_name);
  }
  return {};
}

void register_options(CLI::App& app, const std::vector<OptionSpec>& specs) {
  for (const auto& spec : specs) {
    std::visit(
        [&](auto* target) {
          using T = std::remove_pointer_t<decltype(target)>;
          if constexpr (std::is_same_v<T, bool>) {
            app.add_flag("--" + spec.name, *target, spec.help)->group(spec.group);
          } else if constexpr (std::is_integral_v<T>) {
            app.add_option("--" + spec.name, *target, spec.help)
                ->check(fits_in<T>())
                ->capture_default_str()
                ->group(spec.group);
          } else {
            app.add_option("--" + spec.name, *target, spec.help)->capture_default_str()->group(spec.group);
          }
        },
        spec.target);
  }
}

void apply_config_file(const std::string& path, const std::vector<OptionSpec>& specs, const CLI::App& app) {
  toml::table table;
  try {
    table = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    const auto& where = e.source().begin;
    fail("{}:{}:{}: not valid TOML: {}", path, where.line, where.column, e.description());
  }
  // Strict: a key inside a table must belong to that table's group, and no setting may be given
  // twice (spelled with dashes and underscores, or at the top level and in its group).
  std::map<std::string, std::string> seen;  // option name -> how it was first written
  auto apply_entry = [&](const std::string& group, const std::string& raw_key, const toml::node& node) {
    const std::string key = normalise_key(raw_key);
    const OptionSpec* spec = find_spec(specs, key);
    const std::string written = group.empty() ? raw_key : group + "." + raw_key;
    const std::string renamed = renamed_option(key);
    STRATA_REQUIRE(spec != nullptr || renamed.empty(), "{}: '{}' was renamed '{}'", path, written, renamed);
    STRATA_REQUIRE(spec != nullptr, "{}: unknown key '{}' (the keys are the flags of 'strata train --help')", path,
                   written);
    STRATA_REQUIRE(group.empty() || spec->group == group, "{}: key '{}' belongs in [{}], not in [{}]", path, raw_key,
                   spec->group, group);
    const auto [it, fresh] = seen.emplace(spec->name, written);
    STRATA_REQUIRE(fresh, "{}: '{}' sets {} a second time (first as '{}')", path, written, spec->name, it->second);
    if (app.count("--" + spec->name) > 0) return;  // the command line wins
    assign(path, raw_key, node, *spec);
  };
  for (const auto& [k, node] : table) {
    const std::string key{k.str()};
    if (node.is_table()) {
      STRATA_REQUIRE(is_group(specs, key), "{}: unknown table [{}] (the tables are the groups of 'strata train --help')",
                     path, key);
      for (const auto& [inner, inner_node] : *node.as_table()) apply_entry(key, std::string(inner.str()), inner_node);
    } else {
      apply_entry("", key, node);
    }
  }
}

std::string options_as_toml(const std::vector<OptionSpec>& specs) {
  std::string out;
  std::string group;
  for (const auto& spec : specs) {
    if (spec.group != group) {
      group = spec.group;
      out += fmt::format("[{}]\n", group);
    }
    std::visit(
        [&](auto* target) {
          using T = std::remove_pointer_t<decltype(target)>;
          if constexpr (std::is_same_v<T, bool>) {
            out += fmt::format("{} = {}\n", spec.name, *target ? "true" : "false");
          } else if constexpr (std::is_same_v<T, std::string>) {
            out += fmt::format("{} = \"{}\"\n", spec.name, *target);
          } else if constexpr (std::is_same_v<T, double>) {
            std::string v = fmt::format("{}", *target);
            if (v.find_first_of(".eEn") == std::string::npos) v += ".0";  // stays a TOML float
            out += fmt::format("{} = {}\n", spec.name, v);
          } else {
            out += fmt::format("{} = {}\n", spec.name, *target);
          }
        },
        spec.target);
  }
  return out;
}

}  // namespace strata
