// Shard plan presets (named by role, so they fit any topology), parsing, validation, and what a
// plan resolves to on a topology where its levels collapse.
#include "plan/shard_plan.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <set>

#include "core/error.hpp"

namespace strata {

namespace {

int parse_level(std::string_view name, std::string_view state, const Topology& t, std::string_view spec) {
  if (name == "none") return kReplicated;
  const int l = t.find_level(name);
  std::vector<std::string> names = {"none"};
  for (const auto& lv : t.levels()) names.push_back(lv.name);
  if (t.level(t.level_count() - 1).name != "world") names.emplace_back("world");
  STRATA_REQUIRE(l >= 0, "plan '{}': {} level '{}' is not a level of topology {} (use one of: {})", spec, state, name,
                 t.to_string(), fmt::join(names, ", "));
  return l;
}

}  // namespace

std::string level_label(const Topology& topology, int level) {
  if (level == kReplicated) return "none";
  return fmt::format("{}({})", topology.level(level).name, topology.span(level));
}

std::string ShardPlan::spec(const Topology& t) const {
  const auto name = [&](int level) { return level == kReplicated ? std::string("none") : t.level(level).name; };
  std::string s = fmt::format("weights={},secondary={},grads={},optim={}", name(weights), name(secondary), name(grads),
                              name(optimizer));
  if (quant_weights != QuantBits::kNone) s += fmt::format(",quant_weights={}", quant_bits_name(quant_weights));
  if (quant_grads != QuantBits::kNone) s += fmt::format(",quant_grads={}", quant_bits_name(quant_grads));
  if (collectives == CollectiveAlgorithm::kFlat) s += ",collectives=flat";
  if (gather_bucket_bytes == reduce_bucket_bytes) {
    if (gather_bucket_bytes > 0) s += fmt::format(",bucket_bytes={}", gather_bucket_bytes);
  } else {
    if (gather_bucket_bytes > 0) s += fmt::format(",gather_bucket_bytes={}", gather_bucket_bytes);
    if (reduce_bucket_bytes > 0) s += fmt::format(",reduce_bucket_bytes={}", reduce_bucket_bytes);
  }
  return s;
}

std::vector<std::string> ShardPlan::preset_names() {
  return {"ddp", "zero1", "zero2", "zero3", "zeropp", "mics", "hier3"};
}

ShardPlan ShardPlan::preset(std::string_view name, const Topology& t) {
  const int inner = 0, node = t.node_level(), world = t.level_count() - 1;
  ShardPlan p;
  p.name = std::string(name);
  if (name == "ddp") {
  } else if (name == "zero1") {
    p.optimizer = world;
  } else if (name == "zero2") {
    p.grads = p.optimizer = world;
  } else if (name == "zero3") {
    p.weights = p.grads = p.optimizer = world;
  } else if (name == "zeropp") {
    // ZeRO++ (Wang et al. 2023): qwZ int8 forward gathers, hpZ secondary copy within the node for
    // the backward gathers, qgZ int4 gradient reduction.
    p.weights = p.grads = p.optimizer = world;
    p.secondary = node < world ? node : kReplicated;  // with one level there is nothing below the world
    p.quant_weights = QuantBits::kInt8;
    p.quant_grads = QuantBits::kInt4;
  } else if (name == "mics") {
    p.weights = p.grads = p.optimizer = node;
  } else if (name == "hier3") {
    p.weights = inner;
    p.grads = node;
    p.optimizer = world;
  } else {
    fail("unknown plan '{}'; presets: {} (or an explicit list like weights=gcd,grads=gpu,optim=world)", name,
         fmt::join(preset_names(), ", "));
  }
  p.validate(t);
  return p;
}

ShardPlan ShardPlan::parse(std::string_view spec, const Topology& t) {
  std::vector<std::string_view> items;
  for (std::size_t start = 0;;) {
    const std::size_t comma = spec.find(',', start);
    items.push_back(spec.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  for (std::size_t i = 0; i < items.size(); ++i) {
    STRATA_REQUIRE(!items[i].empty(), "plan '{}': item {} is empty (a stray comma?)", spec, i + 1);
  }
  STRATA_REQUIRE(items.front() != "auto" || items.size() == 1,
                 "plan '{}': 'auto' takes no overrides; name the plan to change (e.g. hier3,quant_grads=int4)", spec);
  ShardPlan p;
  std::size_t first_override = 0;
  if (items.front().find('=') == std::string_view::npos) {
    p = preset(items.front(), t);  // a preset, then overrides
    first_override = 1;
  }
  p.name = std::string(spec);
  std::vector<std::string> seen;
  for (std::size_t i = first_override; i < items.size(); ++i) {
    const std::string_view item = items[i];
    const std::size_t eq = item.find('=');
    STRATA_REQUIRE(eq != std::string_view::npos, "plan '{}': '{}' must read key=value{}", spec, item,
                   i == 0 ? "" : " (only the first item may be a preset name)");
    std::string key(item.substr(0, eq));
    if (key == "optimizer") key = "optim";  // one state, two spellings
    const std::string_view value = item.substr(eq + 1);
    STRATA_REQUIRE(std::find(seen.begin(), seen.end(), key) == seen.end(), "plan '{}': '{}' is given twice", spec, key);
    seen.push_back(key);
    const std::string what = fmt::format("plan '{}': {}", spec, key);
    if (key == "weights") p.weights = parse_level(value, key, t, spec);
    else if (key == "secondary") p.secondary = parse_level(value, key, t, spec);
    else if (key == "grads") p.grads = parse_level(value, key, t, spec);
    else if (key == "optim") p.optimizer = parse_level(value, key, t, spec);
    else if (key == "quant_weights") p.quant_weights = parse_quant_bits(value, what);
    else if (key == "quant_grads") p.quant_grads = parse_quant_bits(value, what);
    else if (key == "quant_backward") {
      if (value == "auto") p.quant_backward = QuantBackward::kAuto;
      else if (value == "on") p.quant_backward = QuantBackward::kOn;
      else if (value == "off") p.quant_backward = QuantBackward::kOff;
      else fail("{}: '{}' must be auto, on or off", what, value);
    } else if (key == "quant_block" || key == "quant_weights_block" || key == "quant_grads_block") {
      std::uint64_t block = 0;
      const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), block);
      STRATA_REQUIRE(ec == std::errc() && end == value.data() + value.size(), "{}: '{}' is not a whole number", what,
                     value);
      validate_quant_block(block, what);
      const bool both = key == "quant_block";
      STRATA_REQUIRE(!both || (std::find(seen.begin(), seen.end(), "quant_weights_block") == seen.end() &&
                               std::find(seen.begin(), seen.end(), "quant_grads_block") == seen.end()),
                     "plan '{}': quant_block sets both block sizes; give it or quant_weights_block and "
                     "quant_grads_block, not both",
                     spec);
      STRATA_REQUIRE(both || std::find(seen.begin(), seen.end(), "quant_block") == seen.end(),
                     "plan '{}': quant_block sets both block sizes; give it or {}, not both", spec, key);
      if (both || key == "quant_weights_block") p.quant_weights_block = static_cast<std::uint32_t>(block);
      if (both || key == "quant_grads_block") p.quant_grads_block = static_cast<std::uint32_t>(block);
    } else if (key == "bucket_bytes" || key == "gather_bucket_bytes" || key == "reduce_bucket_bytes") {
      std::uint64_t bytes = 0;
      const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), bytes);
      STRATA_REQUIRE(ec == std::errc() && end == value.data() + value.size(), "{}: '{}' is not a whole number of bytes",
                     what, value);
      STRATA_REQUIRE(bytes == 0 || bytes >= 4096, "{}: {} bytes is below the 4096 a bucket must hold at least", what,
                     bytes);
      const bool both = key == "bucket_bytes";
      STRATA_REQUIRE(both ? std::find(seen.begin(), seen.end(), "gather_bucket_bytes") == seen.end() &&
                                std::find(seen.begin(), seen.end(), "reduce_bucket_bytes") == seen.end()
                          : std::find(seen.begin(), seen.end(), "bucket_bytes") == seen.end(),
                     "plan '{}': bucket_bytes sets both bucket sizes; give it or gather_bucket_bytes and "
                     "reduce_bucket_bytes, not both",
                     spec);
      if (both || key == "gather_bucket_bytes") p.gather_bucket_bytes = bytes;
      if (both || key == "reduce_bucket_bytes") p.reduce_bucket_bytes = bytes;
    } else if (key == "collectives") {
      if (value == "hierarchical") p.collectives = CollectiveAlgorithm::kHierarchical;
      else if (value == "flat") p.collectives = CollectiveAlgorithm::kFlat;
      else fail("{}: '{}' must be hierarchical or flat", what, value);
    } else if (key == "quant") {
      STRATA_REQUIRE(value == "none", "{}: only quant=none (both off) is a shorthand; set quant_weights and "
                                      "quant_grads to turn quantization on", what);
      p.quant_weights = p.quant_grads = QuantBits::kNone;
      p.quant_backward = QuantBackward::kAuto;
    } else {
      fail("plan '{}': unknown key '{}' (weights, secondary, grads, optim, quant_weights, quant_grads, "
           "quant_backward, quant_block, quant_weights_block, quant_grads_block, quant, collectives, bucket_bytes, gather_bucket_bytes, reduce_bucket_bytes)",
           spec, key);
    }
  }
  // Keys that would do nothing are refused, so a typo in intent is not silently ignored.
  auto given = [&](const char* k) { return std::find(seen.begin(), seen.end(), k) != seen.end(); };
  if (given("quant")) {
    for (const char* k : {"quant_weights", "quant_grads", "quant_backward", "quant_block", "quant_weights_block",
                          "quant_grads_block"}) {
      STRATA_REQUIRE(!given(k), "plan '{}': quant=none and {} contradict each other", spec, k);
    }
  }
  STRATA_REQUIRE(!given("quant_backward") || p.quant_weights != QuantBits::kNone,
                 "plan '{}': quant_backward has no effect without quant_weights", spec);
  STRATA_REQUIRE(!given("quant_weights_block") || p.quant_weights != QuantBits::kNone,
                 "plan '{}': quant_weights_block has no effect without quant_weights", spec);
  STRATA_REQUIRE(!given("quant_grads_block") || p.quant_grads != QuantBits::kNone,
                 "plan '{}': quant_grads_block has no effect without quant_grads", spec);
  STRATA_REQUIRE(!given("quant_block") || p.quantized(),
                 "plan '{}': quant_block has no effect without quant_weights or quant_grads", spec);
  p.validate(t);
  return p;
}

bool ShardPlan::quantizes_backward() const {
  if (quant_weights == QuantBits::kNone) return false;
  if (quant_backward == QuantBackward::kAuto) return !has_secondary();
  return quant_backward == QuantBackward::kOn;
}

QuantFormat ShardPlan::weight_quant(bool backward) const {
  if (quant_weights == QuantBits::kNone || (backward && !quantizes_backward())) return {QuantBits::kNone, 0};
  return {quant_weights, quant_weights_block};
}

QuantFormat ShardPlan::grad_quant() const {
  if (quant_grads == QuantBits::kNone) return {QuantBits::kNone, 0};
  return {quant_grads, quant_grads_block};
}

void ShardPlan::validate(const Topology& t) const {
  const int top = t.level_count() - 1;
  for (int l : {weights, secondary, grads, optimizer}) {
    STRATA_REQUIRE(l >= kReplicated && l <= top, "plan '{}': level index {} is outside the topology", name, l);
  }
  // The optimizer updates its slice from the reduced gradient, so its slice must lie inside
  // this rank's gradient shard.
  STRATA_REQUIRE(optimizer >= grads,
                 "plan '{}': the optimizer state ({}) must be partitioned at least as finely as the gradients ({}); "
                 "otherwise the optimizer would need gradient elements no rank reduced for it",
                 name, level_label(t, optimizer), level_label(t, grads));
  if (has_secondary()) {
    STRATA_REQUIRE(weights != kReplicated, "plan '{}': a secondary weight copy needs partitioned weights", name);
    STRATA_REQUIRE(secondary < weights,
                   "plan '{}': the secondary copy ({}) must be partitioned over a smaller group than the primary "
                   "weights ({}), or it saves no traffic",
                   name, level_label(t, secondary), level_label(t, weights));
  }
  STRATA_REQUIRE(quant_weights == QuantBits::kNone || weights != kReplicated,
                 "plan '{}': quant_weights needs partitioned weights (replicated weights are never gathered)", name);
  STRATA_REQUIRE(quant_backward != QuantBackward::kOn || quant_weights != QuantBits::kNone,
                 "plan '{}': quant_backward=on needs quant_weights", name);
  validate_quant_block(quant_weights_block, fmt::format("plan '{}': quant_weights_block", name));
  validate_quant_block(quant_grads_block, fmt::format("plan '{}': quant_grads_block", name));
}

std::string ShardPlan::describe(const Topology& t) const {
  std::string out = fmt::format("weights={} secondary={} grads={} optim={}", level_label(t, weights),
                                level_label(t, secondary), level_label(t, grads), level_label(t, optimizer));
  if (quantized()) {
    out += fmt::format(" quant weights={}{} grads={}", describe_quant(weight_quant(false)),
                       quant_weights == QuantBits::kNone ? ""
                       : quantizes_backward()             ? " (forward and backward)"
                                                          : " (forward)",
                       describe_quant(grad_quant()));
  }
  if (collectives == CollectiveAlgorithm::kFlat) out += " collectives=flat";
  if (gather_bucket_bytes == reduce_bucket_bytes) {
    if (gather_bucket_bytes > 0) out += fmt::format(" buckets of {} bytes", gather_bucket_bytes);
  } else {
    if (gather_bucket_bytes > 0) out += fmt::format(" gather buckets of {} bytes", gather_bucket_bytes);
    if (reduce_bucket_bytes > 0) out += fmt::format(" reduction buckets of {} bytes", reduce_bucket_bytes);
  }
  return out;
}

namespace {

// How many ranks each state is split over; the secondary is 0 when there is no copy, which is
// not the same as a copy whole on every rank (span 1).
struct Spans {
  int weights = 1;
  int secondary = 0;
  int grads = 1;
  int optimizer = 1;
  bool operator==(const Spans&) const = default;
};

Spans spans_of(const ShardPlan& p, const Topology& t) {
  return {t.span(p.weights), p.has_secondary() ? t.span(p.secondary) : 0, t.span(p.grads), t.span(p.optimizer)};
}

bool secondary_duplicates_weights(const ShardPlan& p, const Topology& t) {
  return p.has_secondary() && t.span(p.secondary) == t.span(p.weights);
}

ShardPlan without_useless_secondary(ShardPlan p, const Topology& t) {
  if (secondary_duplicates_weights(p, t)) p.secondary = kReplicated;
  return p;
}

std::string join_words(const std::vector<std::string>& words) {
  if (words.size() <= 1) return words.empty() ? "" : words.front();
  return fmt::format("{} and {}", fmt::join(words.begin(), words.end() - 1, ", "), words.back());
}

// "weights and grads over 8 ranks, optimizer over 16 ranks": states sharing a span are named
// together, so equal spans (the point of the note) are visible at a glance.
std::string describe_spans(const Spans& s) {
  const std::pair<const char*, int> states[] = {{"weights", s.weights}, {"grads", s.grads}, {"optimizer", s.optimizer}};
  std::vector<int> order;
  for (const auto& [name, span] : states) {
    if (std::find(order.begin(), order.end(), span) == order.end()) order.push_back(span);
  }
  std::vector<std::string> groups;
  for (int span : order) {
    std::vector<std::string> names;
    for (const auto& [name, state_span] : states) {
      if (state_span == span) names.emplace_back(name);
    }
    groups.push_back(fmt::format("{}{} {}", join_words(names), names.size() >= 3 ? " all" : "",
                                 span == 1 ? std::string("replicated") : fmt::format("over {} ranks", span)));
  }
  if (s.secondary == 1) groups.emplace_back("secondary copy whole on every rank");
  if (s.secondary > 1) groups.push_back(fmt::format("secondary copy over {} ranks", s.secondary));
  return fmt::format("{}", fmt::join(groups, ", "));
}

// The levels a preset is defined by; kNone stands for "replicated" (span 1).
enum class Role { kNone, kInner, kNode, kWorld };

int level_of(Role r, const Topology& t) {
  switch (r) {
    case Role::kNone: return kReplicated;
    case Role::kInner: return 0;
    case Role::kNode: return t.node_level();
    case Role::kWorld: return t.level_count() - 1;
  }
  return kReplicated;
}

// The pairs of roles a preset means to cover different numbers of ranks; when a pair does not,
// the preset is not what its name promises (mics that does not replicate across nodes, hier3
// whose weights and gradients share a group, a ZeRO stage with nothing to partition).
std::vector<std::pair<Role, Role>> distinct_roles(std::string_view preset) {
  if (preset == "zero1" || preset == "zero2" || preset == "zero3") return {{Role::kNone, Role::kWorld}};
  if (preset == "zeropp" || preset == "mics") return {{Role::kNone, Role::kNode}, {Role::kNode, Role::kWorld}};
  if (preset == "hier3") return {{Role::kNone, Role::kInner}, {Role::kInner, Role::kNode}, {Role::kNode, Role::kWorld}};
  return {};
}

// "hier3" of "hier3,quant_grads=int4".
std::string preset_base(const std::string& name) { return name.substr(0, name.find(',')); }

bool is_preset(const ShardPlan& p, const Topology& t) {
  const auto names = ShardPlan::preset_names();
  const std::string base = preset_base(p.name);
  if (std::find(names.begin(), names.end(), base) == names.end()) return false;
  // A plan built by hand under a preset's name is judged as the explicit plan it is.
  const ShardPlan q = ShardPlan::preset(base, t);
  return q.weights == p.weights && q.secondary == p.secondary && q.grads == p.grads && q.optimizer == p.optimizer;
}

// Why the preset's roles collapse here, most structural cause first; empty when they do not.
std::vector<std::string> collapse_reasons(std::string_view preset, const Topology& t) {
  bool one_level = false, inner_is_node = false;
  std::set<int> unit_levels;
  for (const auto& [lower, upper] : distinct_roles(preset)) {
    const int a = level_of(lower, t), b = level_of(upper, t);
    if (t.span(a) != t.span(b)) continue;
    if (a == b) {
      one_level |= t.level_count() == 1;
      inner_is_node |= t.level_count() == 2;
    } else {
      for (int l = a + 1; l <= b; ++l) unit_levels.insert(l);  // equal spans: every fan-out between is 1
    }
  }
  std::vector<std::string> reasons;
  if (one_level) {
    reasons.emplace_back(preset == "hier3" ? "with one level, the innermost and node levels are the world"
                                           : "with one level, the node level is the world");
  }
  if (inner_is_node) reasons.emplace_back("the innermost level is the node level");
  if (!unit_levels.empty()) {
    std::vector<std::string> names;
    for (int l : unit_levels) names.push_back(t.level(l).name);
    reasons.push_back(fmt::format("{} {} {} fan-out 1", names.size() == 1 ? "level" : "levels", join_words(names),
                                  names.size() == 1 ? "has" : "have"));
  }
  return reasons;
}

}  // namespace

PlanResolution resolve_plan(const ShardPlan& plan, const Topology& t) {
  PlanResolution r{without_useless_secondary(plan, t), ""};
  const bool preset = is_preset(plan, t);
  std::vector<std::string> reasons = preset ? collapse_reasons(preset_base(plan.name), t) : std::vector<std::string>{};
  const bool degenerate = !reasons.empty();
  if (secondary_duplicates_weights(plan, t)) {
    reasons.push_back(fmt::format("the secondary copy at {} spans as many ranks as the weights at {}, so it would "
                                  "only duplicate them and is dropped",
                                  level_label(t, plan.secondary), level_label(t, plan.weights)));
  }
  if (reasons.empty()) return r;

  std::string what = "runs without its secondary copy";
  if (degenerate) {
    const Spans spans = spans_of(r.plan, t);
    std::string match;
    for (const auto& name : ShardPlan::preset_names()) {
      if (name != preset_base(plan.name) && spans_of(without_useless_secondary(ShardPlan::preset(name, t), t), t) == spans) {
        match = name;
        break;
      }
    }
    what = match.empty() ? fmt::format("runs with {} (like no other preset)", describe_spans(spans))
                         : fmt::format("runs as {} ({})", match, describe_spans(spans));
  }
  if (r.plan.quantized()) what += " with its quantized collectives";
  if (secondary_duplicates_weights(plan, t) && r.plan.quant_backward == QuantBackward::kAuto &&
      r.plan.quant_weights != QuantBits::kNone) {
    reasons.emplace_back("without the copy, backward gathers the primary shard and is quantized like forward "
                         "(quant_backward=auto)");
  }
  r.note = fmt::format("plan {} on topology {} {}: {}", plan.name, t.to_string(), what, fmt::join(reasons, "; "));
  return r;
}

}  // namespace strata
