// Topology parsing, presets and group arithmetic.
#include "topo/topology.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>

#include "core/error.hpp"

namespace strata {

namespace {

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  while (true) {
    const std::size_t pos = s.find(sep, start);
    parts.push_back(s.substr(start, pos == std::string_view::npos ? std::string_view::npos : pos - start));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return parts;
}

double parse_number(std::string_view text, std::string_view what, std::string_view spec) {
  double value = 0.0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  STRATA_REQUIRE(ec == std::errc() && ptr == text.data() + text.size() && value > 0.0 && std::isfinite(value),
                 "topology '{}': '{}' is not a valid {} (a positive, finite number and a unit)", spec, text, what);
  return value;
}

// "12.5GB/s", "200GB/s", "100Gb/s", "800MB/s"
double parse_bandwidth(std::string_view text, std::string_view spec) {
  struct Unit { std::string_view suffix; double scale; };
  constexpr Unit kUnits[] = {{"TB/s", 1e12}, {"GB/s", 1e9}, {"MB/s", 1e6}, {"Tb/s", 1e12 / 8}, {"Gb/s", 1e9 / 8},
                             {"Mb/s", 1e6 / 8}};
  for (const Unit& u : kUnits) {
    if (text.size() > u.suffix.size() && text.substr(text.size() - u.suffix.size()) == u.suffix) {
      return parse_number(text.substr(0, text.size() - u.suffix.size()), "bandwidth", spec) * u.scale;
    }
  }
  fail("topology '{}': bandwidth '{}' needs a unit (TB/s, GB/s, MB/s, Tb/s, Gb/s or Mb/s)", spec, text);
}

// "2us", "1.5ms", "800ns", "1s"
double parse_latency(std::string_view text, std::string_view spec) {
  struct Unit { std::string_view suffix; double scale; };
  constexpr Unit kUnits[] = {{"ns", 1e-9}, {"us", 1e-6}, {"ms", 1e-3}, {"s", 1.0}};
  for (const Unit& u : kUnits) {
    if (text.size() > u.suffix.size() && text.substr(text.size() - u.suffix.size()) == u.suffix) {
      return parse_number(text.substr(0, text.size() - u.suffix.size()), "latency", spec) * u.scale;
    }
  }
  fail("topology '{}': latency '{}' needs a unit (ns, us, ms or s)", spec, text);
}

std::string format_bandwidth(double b) {
  if (b >= 1e12) return fmt::format("{:g}TB/s", b / 1e12);
  if (b >= 1e9) return fmt::format("{:g}GB/s", b / 1e9);
  return fmt::format("{:g}MB/s", b / 1e6);
}

std::string format_latency(double s) {
  if (s >= 1e-3) return fmt::format("{:g}ms", s * 1e3);
  if (s >= 1e-6) return fmt::format("{:g}us", s * 1e6);
  return fmt::format("{:g}ns", s * 1e9);
}

}  // namespace

Topology Topology::parse(std::string_view spec, int world_size) {
  STRATA_REQUIRE(world_size >= 1, "world size must be at least 1 (got {})", world_size);
  // Hardware presets live with the cluster models (sim/cluster_model), one source of the facts;
  // the caller resolves their names. Only the machine-free one is known here.
  if (spec == "flat") return parse("world:*", world_size);
  STRATA_REQUIRE(spec != "auto", "topology 'auto' is found by a running job (strata train under mpirun or srun, "
                 "which prints the levels it stands for); here give the levels, 'flat', or a cluster preset");
  STRATA_REQUIRE(spec.find(':') != std::string_view::npos,
                 "unknown topology '{}': give levels as name:fanout[@bandwidth][~latency] innermost first (e.g. "
                 "gcd:2,gpu:4,node:*), 'flat', or a cluster preset ('strata simulate --help' lists them)", spec);
  Topology t;
  t.world_size_ = world_size;
  const auto parts = split(spec, ',');
  int star = -1;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    std::string_view part = parts[i];
    Level level;
    const auto tilde = part.find('~');
    if (tilde != std::string_view::npos) {
      level.latency = parse_latency(part.substr(tilde + 1), spec);
      part = part.substr(0, tilde);
    }
    const auto at = part.find('@');
    if (at != std::string_view::npos) {
      level.bandwidth = parse_bandwidth(part.substr(at + 1), spec);
      part = part.substr(0, at);
    }
    const auto colon = part.find(':');
    STRATA_REQUIRE(colon != std::string_view::npos && colon > 0,
                   "topology '{}': level '{}' must read name:fanout (e.g. gpu:4)", spec, parts[i]);
    level.name = std::string(part.substr(0, colon));
    // Names appear in plans ("weights=gcd") and reports: letters, digits, '_' and '-' only.
    const bool plain = std::isalpha(static_cast<unsigned char>(level.name[0])) &&
                       std::all_of(level.name.begin(), level.name.end(), [](char c) {
                         return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
                       });
    STRATA_REQUIRE(plain, "topology '{}': level name '{}' must start with a letter and hold only letters, digits, "
                   "'_' and '-'", spec, level.name);
    STRATA_REQUIRE(level.name != "none", "topology '{}': 'none' is reserved for replicated states", spec);
    STRATA_REQUIRE(t.find_level(level.name) < 0, "topology '{}': level '{}' appears twice", spec, level.name);
    const std::string_view fan = part.substr(colon + 1);
    if (fan == "*") {
      STRATA_REQUIRE(i + 1 == parts.size(), "topology '{}': only the outermost level may take '*'", spec);
      star = static_cast<int>(i);
    } else {
      int value = 0;
      const auto [ptr, ec] = std::from_chars(fan.data(), fan.data() + fan.size(), value);
      STRATA_REQUIRE(ec == std::errc() && ptr == fan.data() + fan.size() && value >= 1,
                     "topology '{}': fan-out '{}' of level '{}' must be a positive integer or '*'", spec, fan,
                     level.name);
      level.fanout = value;
    }
    t.levels_.push_back(level);
  }
  STRATA_REQUIRE(t.find_level("world") < 0 || t.find_level("world") == t.level_count() - 1,
                 "topology '{}': 'world' may only name the outermost level", spec);
  // In 64 bits, saturating: fan-outs given by a user must not overflow into a zero or negative
  // product (a division by zero below).
  long long inner_wide = 1;
  for (int l = 0; l < t.level_count(); ++l) {
    if (l != star) inner_wide = std::min(inner_wide * t.levels_[static_cast<std::size_t>(l)].fanout, 1LL << 40);
  }
  if (inner_wide > world_size) {
    STRATA_REQUIRE(star < 0, "topology '{}': the inner levels hold {}{} ranks, more than the job's {}", spec,
                   inner_wide >= (1LL << 40) ? "over " : "", inner_wide, world_size);
    fail("topology '{}' describes {}{} ranks but the job has {}", spec, inner_wide >= (1LL << 40) ? "over " : "",
         inner_wide, world_size);
  }
  const int inner = static_cast<int>(inner_wide);
  if (star >= 0) {
    STRATA_REQUIRE(world_size % inner == 0,
                   "topology '{}': the inner levels hold {} ranks, which does not divide the world size {}", spec,
                   inner, world_size);
    t.levels_[static_cast<std::size_t>(star)].fanout = world_size / inner;
  } else {
    STRATA_REQUIRE(inner == world_size, "topology '{}' describes {} ranks but the job has {}", spec, inner,
                   world_size);
  }
  return t;
}

int Topology::find_level(std::string_view name) const {
  for (int l = 0; l < level_count(); ++l) {
    if (levels_[static_cast<std::size_t>(l)].name == name) return l;
  }
  if (name == "world") return level_count() - 1;
  return -1;
}

int Topology::span(int l) const { return span(0, l); }

int Topology::span(int first, int last) const {
  int s = 1;
  for (int l = std::max(first, 0); l <= last && l < level_count(); ++l) s *= levels_[static_cast<std::size_t>(l)].fanout;
  return s;
}

int Topology::coordinate(int rank, int l) const { return (rank / span(l - 1)) % level(l).fanout; }

std::vector<int> Topology::coordinates(int rank) const {
  std::vector<int> c;
  for (int l = 0; l < level_count(); ++l) c.push_back(coordinate(rank, l));
  return c;
}

RankGroup Topology::levels_group(int rank, int first, int last) const {
  RankGroup g;
  g.first_level = first;
  g.last_level = last;
  // Zero out the coordinates first..last, then enumerate them with the innermost varying fastest.
  int base = rank;
  for (int l = first; l <= last; ++l) base -= coordinate(rank, l) * span(l - 1);
  const int count = span(first, last);
  for (int i = 0; i < count; ++i) {
    int r = base, rest = i;
    for (int l = first; l <= last; ++l) {
      r += (rest % level(l).fanout) * span(l - 1);
      rest /= level(l).fanout;
    }
    g.ranks.push_back(r);
  }
  std::sort(g.ranks.begin(), g.ranks.end());
  return g;
}

int Topology::shard_index(int rank, int first, int last) const {
  int index = 0;
  for (int l = first; l <= last; ++l) index = index * level(l).fanout + coordinate(rank, l);
  return index;
}

RankGroup Topology::group(int rank, int l) const { return levels_group(rank, 0, l); }

RankGroup Topology::cross_group(int rank, int l) const { return levels_group(rank, l + 1, level_count() - 1); }

std::string Topology::to_string() const {
  std::vector<std::string> parts;
  for (const auto& l : levels_) {
    const std::string bandwidth = l.bandwidth > 0 ? fmt::format("@{}", format_bandwidth(l.bandwidth)) : "";
    const std::string latency = l.latency > 0 ? fmt::format("~{}", format_latency(l.latency)) : "";
    parts.push_back(fmt::format("{}:{}{}{}", l.name, l.fanout, bandwidth, latency));
  }
  return fmt::format("{}", fmt::join(parts, ","));
}

std::size_t shard_offset(const Topology& topology, int rank, std::size_t n, int first, int last) {
  const auto span = static_cast<std::size_t>(topology.span(first, last));
  return static_cast<std::size_t>(topology.shard_index(rank, first, last)) * (n / span);
}

}  // namespace strata
